"""An ``LLMProvider`` for any OpenAI-compatible chat completions endpoint (stdlib only).

Works with vLLM (``http://host:8000/v1``), the llama.cpp server (``http://host:8080/v1``),
Ollama (``http://host:11434/v1``) and hosted APIs. The URL may be the API base (``…/v1``)
or the full ``…/chat/completions`` URL. The remote endpoint's listwise judge wraps it in
``ProviderListwiseJudge``, so prompt and parsing are the local judge's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ragspine_lite.common.llm import ChatCompletion, Choice, ResponseMessage, Usage
from ragspine_lite.remote.errors import RemoteError
from ragspine_lite.remote.transport import Transport, default_transport, request_json

__all__ = [
    "CHAT_COMPLETIONS_SUFFIX",
    "LLM_API_KEY_ENV",
    "LLM_MODEL_ENV",
    "LLM_TIMEOUT_ENV",
    "LLM_URL_ENV",
    "OpenAICompatibleProvider",
    "parse_chat_completion",
    "provider_from_env",
]

CHAT_COMPLETIONS_SUFFIX = "/chat/completions"
LLM_URL_ENV = "RAGSPINE_LLM_URL"
LLM_MODEL_ENV = "RAGSPINE_LLM_MODEL"
LLM_API_KEY_ENV = "RAGSPINE_LLM_API_KEY"
LLM_TIMEOUT_ENV = "RAGSPINE_LLM_TIMEOUT"
DEFAULT_LLM_TIMEOUT_S = 30.0
DEFAULT_LLM_MAX_TOKENS = 256


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def parse_chat_completion(data: Any) -> ChatCompletion:
    """An OpenAI-shaped ``chat.completion`` JSON object → :class:`ChatCompletion`.

    Needs ``choices[0].message``; ``content`` may be null. Anything else → ``ValueError``.
    """
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        raise ValueError("not a chat completion: no 'choices' list")
    choices = []
    for i, raw in enumerate(data["choices"]):
        message = raw.get("message") if isinstance(raw, dict) else None
        if not isinstance(message, dict):
            raise ValueError(f"choices[{i}] has no 'message' object")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise ValueError(f"choices[{i}].message.content must be a string or null")
        choices.append(
            Choice(
                index=_int(raw.get("index", i)),
                message=ResponseMessage(
                    role=str(message.get("role", "assistant")),
                    content=content,
                    tool_calls=message.get("tool_calls"),
                ),
                finish_reason=str(raw.get("finish_reason") or "stop"),
            )
        )
    if not choices:
        raise ValueError("chat completion has no choices")
    usage = data.get("usage")
    return ChatCompletion(
        choices=tuple(choices),
        usage=Usage(
            prompt_tokens=_int(usage.get("prompt_tokens")),
            completion_tokens=_int(usage.get("completion_tokens")),
            total_tokens=_int(usage.get("total_tokens")),
        )
        if isinstance(usage, dict)
        else None,
        model=str(data.get("model", "")),
        id=str(data.get("id", "")),
        created=_int(data.get("created")),
    )


class OpenAICompatibleProvider:
    """``chat(messages)`` → one ``POST {url}/chat/completions`` (temperature 0 by default).

    ``api_key`` is sent as a bearer token when given. Failures raise ``RemoteError``
    (a ``ProviderError``); the key never appears in messages or ``repr``.
    """

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        transport: Transport | None = None,
    ) -> None:
        base = str(url).rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise ValueError(f"chat completions URL must start with http(s)://, got {url!r}")
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"model must be a non-blank string, got {model!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (
            math.isfinite(timeout) and timeout > 0
        ):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
        ):
            raise ValueError(f"max_tokens must be an int >= 1 or None, got {max_tokens!r}")
        suffix = CHAT_COMPLETIONS_SUFFIX
        self.url = base if base.endswith(suffix) else base + suffix
        self.model = model
        self.timeout = float(timeout)
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self.transport = transport if transport is not None else default_transport()
        self._api_key = api_key

    def __repr__(self) -> str:
        return f"OpenAICompatibleProvider({self.url!r}, model={self.model!r})"

    def chat(
        self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None
    ) -> ChatCompletion:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "temperature": self.temperature,
            "stream": False,
        }
        if tools:
            payload["tools"] = list(tools)
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        data = request_json(
            self.transport, "POST", self.url, payload, headers=headers, timeout=self.timeout
        )
        try:
            return parse_chat_completion(data)
        except ValueError as exc:
            raise RemoteError(
                f"POST {self.url} answered an unusable chat completion: {exc}",
                kind="malformed",
                url=self.url,
            ) from exc


def provider_from_env(
    environ: Mapping[str, str], *, url: str | None = None, model: str | None = None
) -> OpenAICompatibleProvider | None:
    """The query layers' provider at an edge: ``url``/``model`` (flags) else
    ``RAGSPINE_LLM_URL`` / ``RAGSPINE_LLM_MODEL``, key ``RAGSPINE_LLM_API_KEY``, timeout
    ``RAGSPINE_LLM_TIMEOUT`` (seconds, default 30), answers capped at 256 tokens.

    No URL → ``None``; a URL without a model, a bad URL or timeout → ``ValueError``.
    """
    url = url or environ.get(LLM_URL_ENV) or None
    if url is None:
        return None
    model = model or environ.get(LLM_MODEL_ENV) or ""
    if not model.strip():
        raise ValueError(
            f"LLM URL {url!r} needs a model name (--llm-model or {LLM_MODEL_ENV})"
        )
    raw = environ.get(LLM_TIMEOUT_ENV) or str(DEFAULT_LLM_TIMEOUT_S)
    try:
        timeout = float(raw)
    except ValueError:
        raise ValueError(f"{LLM_TIMEOUT_ENV} must be a number of seconds, got {raw!r}") from None
    return OpenAICompatibleProvider(
        url, model, api_key=environ.get(LLM_API_KEY_ENV) or None, timeout=timeout,
        max_tokens=DEFAULT_LLM_MAX_TOKENS,
    )
