"""What an agent remembers about the user (``sessions_app.memory``): list, read and delete.

``GET agents/{slug}/memory`` lists the user's own memory files of that agent;
``GET``/``DELETE agents/{slug}/memory/{path}`` reads or deletes one (``path`` under
``/memories``); ``DELETE agents/{slug}/memory`` deletes them all. Every delete is a versioned
change authored by the user. An agent the user may not use is a 404, and so is a file of
another user or agent: there is no route to them. Shared memory is not listed here (staff see
it in the admin).
"""

from __future__ import annotations

from django.utils.translation import gettext
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.response import Response

from sessions_app import access, agents
from sessions_app import memory as store
from sessions_app.models import Agent, MemoryChange

from .errors import ApiError
from .schema import READ_ERRORS, describe, described
from .views import AhenticViewSet


class MemoryFileSerializer(serializers.Serializer):
    path = serializers.SerializerMethodField()
    size = serializers.IntegerField()
    updatedAt = serializers.DateTimeField(source="updated_at")  # noqa: N815 - API field

    def get_path(self, row) -> str:
        return store.shown(row.path)


class MemoryFileContentSerializer(MemoryFileSerializer):
    content = serializers.CharField()


class MemoryListSerializer(serializers.Serializer):
    agent = serializers.CharField()
    memory = serializers.CharField(allow_null=True, help_text='null (off), "user", "user+shared"')
    files = MemoryFileSerializer(many=True)
    limits = serializers.DictField(child=serializers.IntegerField())


class MemoryClearedSerializer(serializers.Serializer):
    deleted = serializers.IntegerField()


memory_list = describe(
    "agent_memory_list",
    "The user's memory files of an agent",
    {200: MemoryListSerializer},
)
memory_clear = describe(
    "agent_memory_clear", "Delete all the user's memory of an agent", {200: MemoryClearedSerializer}
)
memory_read = describe(
    "agent_memory_read", "One memory file of the user", {200: MemoryFileContentSerializer}
)
memory_delete = describe(
    "agent_memory_delete",
    "Delete one memory file of the user",
    {204: OpenApiResponse(description="Deleted.")},
    READ_ERRORS,
)


def agent_not_found() -> ApiError:
    return ApiError("ahentic_agent_not_found", gettext("Agent not found."), 404)


def memory_not_found() -> ApiError:
    return ApiError("ahentic_memory_not_found", gettext("No such memory file."), 404)


class MemoryViewSet(AhenticViewSet):
    """The user's memory of an agent: list, read, delete one, delete all."""

    serializer_class = MemoryFileSerializer

    def agent(self, slug: str) -> Agent:
        agent = Agent.objects.filter(slug=slug).first()
        if agent is None or not access.may_use(self.request.user, agent):
            raise agent_not_found()
        return agent

    def relative(self, path: str) -> str:
        # A path that escapes the root names no file there can be: a 404 like any other. A
        # name that looks like another is refused as the memory tool refuses it (a 400).
        try:
            relative = store.normalise(f"{store.ROOT}/{path}")
        except store.MemoryError as exc:
            if exc.code == "memory_lookalike_path":
                raise ApiError(
                    "ahentic_memory_lookalike_path",
                    gettext(
                        "This memory path has a character that looks like another (an "
                        "invisible, direction-changing or full-width character, or a case "
                        "variant of “shared”)."
                    ),
                ) from None
            raise memory_not_found() from None
        if not relative:
            raise memory_not_found()
        return relative

    def writer(self) -> store.Writer:
        return store.Writer(MemoryChange.Author.USER, user=self.request.user)

    @described(memory_list)
    def overview(self, request, slug: str):
        agent = self.agent(slug)
        version = agents.latest_version(agent)
        mode = agents.AgentSettings(version.config if version else {}).MEMORY
        body = {
            "agent": agent.slug,
            "memory": mode,
            "files": store.files(agent, request.user),
            "limits": {
                "fileBytes": store.MAX_FILE_BYTES,
                "files": store.MAX_FILES,
                "totalBytes": store.MAX_TOTAL_BYTES,
            },
        }
        return Response(MemoryListSerializer(body).data)

    @described(memory_clear)
    def clear(self, request, slug: str):
        agent = self.agent(slug)
        deleted = store.memory_clear(agent, request.user, writer=self.writer())
        return Response({"deleted": deleted})

    @described(memory_read)
    def retrieve(self, request, slug: str, path: str):
        agent = self.agent(slug)
        relative = self.relative(path)
        found = next((f for f in store.files(agent, request.user) if f.path == relative), None)
        if found is None:
            raise memory_not_found()
        return Response(MemoryFileContentSerializer(found).data)

    @described(memory_delete)
    def destroy(self, request, slug: str, path: str):
        agent = self.agent(slug)
        relative = self.relative(path)
        if not store.file_delete(agent, request.user, relative, writer=self.writer()):
            raise memory_not_found()
        return Response(status=204)
