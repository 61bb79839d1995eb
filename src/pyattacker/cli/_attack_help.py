"""The examples and explanations at the end of ``pyattacker attack --help``."""

__all__ = ["EPILOG"]

EPILOG = """\b
Examples:
  pyattacker attack http://127.0.0.1:8080/ --rate 500/s --duration 30s
  pyattacker attack URL --rate 200/s --arrival poisson --requests 10000 --json out.json
  pyattacker attack URL --stages 10s:100/s,30s:1000/s,10s:0/s
  pyattacker attack URL1 URL2 --clients 32 --duration 1m --algorithm least_busy
  pyattacker attack URL -X POST -H 'Content-Type: application/json' --body @req.json
  pyattacker attack URL --rate 200/s --duration 1m --html report.html
  pyattacker attack URL --scenario flows.py:checkout --rate 20/s --duration 1m
  pyattacker attack URL --rate 500/s --duration 40s --warmup 10s
  pyattacker attack URL --rate 200/s --duration 10m --serve 9646 --serve-linger 30s
  pyattacker attack --llm http://127.0.0.1:8000/v1 --model m --rate 2/s --duration 60s \\
      --shape 1000:200 --key $KEY
  pyattacker attack --llm URL --model m --clients 8 --requests 200 --prompts prompts.jsonl \\
      --retry exponential --window 60s
  pyattacker attack --llm URL --model m --sweep --sweep-levels 5 --duration 30s --html s.html
  pyattacker attack --llm URL --model m --sweep concurrency=1,8,32,128 --requests 200

\b
Latency is reported on two clocks: "scheduled" counts from when the load model meant the
request to start (what a user would see; a generator that falls behind cannot hide it),
"sent" from when it actually left (service time). Retries are off unless --retry says so,
and every attempt is counted.

\b
With --llm each URL is an OpenAI-compatible base (http://host:8000/v1, or an Azure OpenAI
resource with --azure-deployment): requests are chat completions (or --api completions),
streamed unless --no-stream. The report adds end to end and time to first token, both on
both clocks, inter-token latency, time per output token (TTFT, ITL and TPOT need a
stream), and requests and tokens per minute. Token counts are the server's own (its usage
report); --shape prompts are CONTEXT common English words, about one token each in
OpenAI's tokenizers, so no tokenizer is downloaded and nothing else touches the network.
--retry none sends exactly one attempt per request: a throttled request is counted as
throttled, not retried behind your back.
"""
