/*
 * Translation for the sidebar: Django's JavaScript catalog. The sidebar template loads the
 * catalog (a classic script, so it runs before these modules) and the catalog defines
 * `window.django`; without it every string stays as written (English).
 *
 * Write each string as a plain literal in the call, so that `makemessages -d djangojs` finds it:
 *   gettext("Stop")
 *   gettext("Deleted %(title)s", { title })
 *   ngettext("%(count)s file", "%(count)s files", count, { count })
 * Never a template literal or a concatenation inside the call.
 */

function catalog() {
  return typeof window !== "undefined" && window.django && window.django.gettext
    ? window.django
    : null;
}

/** Replace %(name)s with params[name]; a name not given stays as written. */
function format(text, params) {
  if (!params) return text;
  return text.replace(/%\((\w+)\)s/g, (whole, name) =>
    Object.prototype.hasOwnProperty.call(params, name) ? String(params[name]) : whole,
  );
}

export function gettext(text, params) {
  const django = catalog();
  return format(django ? django.gettext(text) : text, params);
}

export function ngettext(singular, plural, count, params) {
  const django = catalog();
  const text = django
    ? django.ngettext(singular, plural, count)
    : count === 1
      ? singular
      : plural;
  return format(text, params);
}

/** The page's language (the <html lang>, which Django's LocaleMiddleware sets), for Intl. */
export function locale() {
  const lang = document.documentElement.lang;
  return lang || undefined;
}
