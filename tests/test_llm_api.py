"""The public surface of ``pyattacker.llm`` is exactly what ``__all__`` says."""

from __future__ import annotations

import subprocess
import sys

import pyattacker.llm

PUBLIC = {
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
}


def test_all_is_exactly_the_public_names_in_ruffs_order_and_each_resolves() -> None:
    names = list(pyattacker.llm.__all__)
    assert set(names) == PUBLIC
    assert len(names) == len(PUBLIC)
    assert names == sorted(names, key=lambda n: (not n.isupper(), not n[:1].isupper(), n))
    for name in names:
        assert hasattr(pyattacker.llm, name), name
    public = {n for n in vars(pyattacker.llm) if not n.startswith("_")}
    assert public - PUBLIC <= {"annotations"}, public - PUBLIC


def test_importing_the_llm_package_does_not_import_the_openai_sdk() -> None:
    code = "import sys, pyattacker.llm; print('openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
