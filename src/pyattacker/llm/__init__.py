"""OpenAI-compatible LLM endpoints, measured honestly: streamed on our own HTTP client.

* :class:`LlmClient` sends one ``chat/completions`` or ``completions`` request (streamed
  over server-sent events, or as a whole body) and returns an :class:`LlmResult`: when it
  was sent, its first byte, its first content chunk (TTFT), every later content chunk
  (ITL), its end, the server's token :class:`Usage`, the finish reason and the rate-limit
  headers. It never retries.
* :class:`LlmSender` is the attack engine's sender for LLM endpoints: one attempt, one
  request, the prompt chosen by the request ordinal (:class:`SyntheticPrompts`,
  :class:`JsonlPrompts`).
* :func:`endpoint_url`, :func:`auth_headers` and :func:`build_request` speak the wire
  format (plain OpenAI-compatible servers and Azure OpenAI); :class:`SseParser` reads
  event streams with the arrival time of each event.
* :func:`openai_client` builds the official SDK's client with ``max_retries=0``;
  :func:`check_no_hidden_retries` warns about one that retries behind the policy's back.

Failures are :class:`LlmStatusError` (status >= 400) and :class:`LlmResponseError` (a 2xx
answer that is not OpenAI's: not JSON, no choices, a broken or cut stream), both in the
:class:`~pyattacker.errors.HttpError` tree, so the one classifier reads them. API keys are
sent only in headers and scrubbed from every message. See ``docs/llm.md``.
"""

from pyattacker.llm._client import LlmClient
from pyattacker.llm._errors import LlmErrorKind, LlmResponseError, LlmStatusError, SseError
from pyattacker.llm._openai import (
    AZURE_API_VERSION,
    Api,
    LlmRequest,
    auth_headers,
    build_request,
    endpoint_url,
    is_azure,
)
from pyattacker.llm._prompts import (
    MAX_SHAPE_TOKENS,
    VOCABULARY,
    JsonlPrompts,
    Prompt,
    PromptSource,
    Shape,
    SyntheticPrompts,
    parse_shape,
)
from pyattacker.llm._result import LlmResult, Usage
from pyattacker.llm._sdk import (
    HiddenRetriesWarning,
    azure_openai_client,
    check_no_hidden_retries,
    openai_client,
)
from pyattacker.llm._sender import LlmSender, fill_attempt
from pyattacker.llm._sse import DONE, SseEvent, SseParser

__all__ = [
    "AZURE_API_VERSION",
    "DONE",
    "MAX_SHAPE_TOKENS",
    "VOCABULARY",
    "Api",
    "HiddenRetriesWarning",
    "JsonlPrompts",
    "LlmClient",
    "LlmErrorKind",
    "LlmRequest",
    "LlmResponseError",
    "LlmResult",
    "LlmSender",
    "LlmStatusError",
    "Prompt",
    "PromptSource",
    "Shape",
    "SseError",
    "SseEvent",
    "SseParser",
    "SyntheticPrompts",
    "Usage",
    "auth_headers",
    "azure_openai_client",
    "build_request",
    "check_no_hidden_retries",
    "endpoint_url",
    "fill_attempt",
    "is_azure",
    "openai_client",
    "parse_shape",
]
