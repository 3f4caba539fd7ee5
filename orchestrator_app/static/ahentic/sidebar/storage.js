/*
 * localStorage under a per-user prefix. Storage may be disabled (privacy modes) or full: the
 * sidebar then still works, it only forgets its tabs and layout between pages.
 */
export function createStorage(prefix) {
  return {
    read(key, fallback) {
      try {
        const raw = window.localStorage.getItem(prefix + key);
        return raw ? JSON.parse(raw) : fallback;
      } catch (err) {
        return fallback; // storage disabled or a corrupt value: start fresh
      }
    },
    write(key, value) {
      try {
        window.localStorage.setItem(prefix + key, JSON.stringify(value));
      } catch (err) {
        /* quota or privacy mode */
      }
    },
    remove(key) {
      try {
        window.localStorage.removeItem(prefix + key);
      } catch (err) {
        /* as above */
      }
    },
  };
}
