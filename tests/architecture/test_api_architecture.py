"""The API stays thin: its views validate (serializers), call a service and answer; no view writes
a row itself. Read from the source (``orchestrator_app/api/views.py``), as test_architecture.py
reads the imports."""

import ast

from tests.support.paths import ROOT

VIEWS = ROOT / "orchestrator_app" / "api" / "views.py"
# Methods that write rows when called on a model, a manager, a queryset or an instance.
ALWAYS_WRITES = {
    "save",
    "delete",
    "bulk_create",
    "bulk_update",
    "get_or_create",
    "update_or_create",
}
# ``create`` and ``update`` are also dict and service names: a write only on a queryset chain.
QUERYSET_WRITES = {"create", "update"}
QUERYSET_STARTS = {
    "objects",
    "_base_manager",
    "_default_manager",
    "filter",
    "exclude",
    "all",
    "get_queryset",
    "select_for_update",
    "only",
    "defer",
}
# Receivers that are not rows: Django's cache, and a serializer (DRF's ``perform_create`` hook
# calls ``serializer.save()``, whose ``create`` calls a service).
NOT_ROWS = {"cache", "serializer"}
# view -> why it still writes (strict: an entry whose view no longer writes fails).
KNOWN_WRITES: dict[str, str] = {}


def _chain(node: ast.AST) -> list[str]:
    """The names along a call/attribute chain, outermost last: ``A.objects.filter(x).update``
    gives ``["A", "objects", "filter", "update"]``."""
    names: list[str] = []
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            names.append(node.id)
            break
        else:
            break
    return names[::-1]


def direct_writes(source: str) -> dict[str, list[str]]:
    """``{"Class.method": ["line: call"]}`` for every direct row write in ``source``'s views."""
    found: dict[str, list[str]] = {}
    for cls in ast.parse(source).body:
        if not isinstance(cls, ast.ClassDef):
            continue
        for method in cls.body:
            if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(method):
                if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                    continue
                chain = _chain(node.func)
                name, receiver = chain[-1], chain[:-1]
                if not receiver or receiver[0] in NOT_ROWS:
                    continue
                writes = name in ALWAYS_WRITES or (
                    name in QUERYSET_WRITES and QUERYSET_STARTS & set(receiver)
                )
                if writes:
                    found.setdefault(f"{cls.name}.{method.name}", []).append(
                        f"{node.lineno}: {'.'.join(chain)}(...)"
                    )
    return found


def test_no_view_writes_a_row_directly():
    writes = direct_writes(VIEWS.read_text())

    unexpected = {view: lines for view, lines in writes.items() if view not in KNOWN_WRITES}
    assert unexpected == {}, "a view writes rows itself; call a service instead"
    gone = sorted(set(KNOWN_WRITES) - set(writes))
    assert gone == [], f"no longer writes: remove from KNOWN_WRITES: {gone}"


def test_the_check_sees_each_kind_of_direct_write():
    source = """
class V:
    def a(self):
        Session.objects.filter(pk=1).update(title="x")
    def b(self):
        self.get_object().save()
    def c(self):
        Session.objects.create(owner=None)
    def d(self):
        Event.objects.bulk_create([])
    def e(self):
        self.get_queryset().filter(pk=1).delete()
    def fine(self, data):
        fields = {}
        fields.update(title=data["title"])
        services.session_create(owner=None)
        runstate.session_update(session_id=1)
        cache.delete("key")
        serializer = self.get_serializer(data=data)
        serializer.save(owner=None)
"""
    assert sorted(direct_writes(source)) == ["V.a", "V.b", "V.c", "V.d", "V.e"]
