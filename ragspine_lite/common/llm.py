"""OpenAI-shaped chat types and the ``LLMProvider`` seam.

Retrieval only ever reads ``resp.choices[0].message.content or ""``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragspine_lite.common.errors import ProviderError

__all__ = [
    "ChatCompletion",
    "Choice",
    "EchoProvider",
    "LLMProvider",
    "ProviderError",
    "ResponseMessage",
    "Usage",
    "completion_text",
]


@dataclass(frozen=True)
class ResponseMessage:
    role: str = "assistant"
    content: str | None = None
    tool_calls: Any = None


@dataclass(frozen=True)
class Choice:
    index: int
    message: ResponseMessage
    finish_reason: str = "stop"


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


@dataclass(frozen=True)
class ChatCompletion:
    choices: tuple[Choice, ...]
    usage: Usage | None = None
    model: str = ""
    id: str = ""
    created: int = 0
    object: str = "chat.completion"


@runtime_checkable
class LLMProvider(Protocol):
    """Anything that answers an OpenAI-shaped chat request."""

    def chat(
        self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None
    ) -> ChatCompletion: ...


def completion_text(resp: ChatCompletion) -> str:
    """``resp.choices[0].message.content or ""`` (empty when there is no choice)."""
    if not resp.choices:
        return ""
    return resp.choices[0].message.content or ""


class EchoProvider:
    """A deterministic provider for tests and demos: answers with a fixed text.

    ``reply`` may be a string or a callable ``(messages) -> str``; every call is
    recorded in ``calls`` as ``(messages, tools)``.
    """

    def __init__(self, reply: Any = "", *, model: str = "echo") -> None:
        self.reply = reply
        self.model = model
        self.calls: list[tuple[list[dict[str, Any]], list[dict[str, Any]] | None]] = []

    def chat(
        self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None
    ) -> ChatCompletion:
        self.calls.append((messages, tools))
        text = self.reply(messages) if callable(self.reply) else str(self.reply)
        msg = ResponseMessage(content=text)
        return ChatCompletion(choices=(Choice(index=0, message=msg),), model=self.model)
