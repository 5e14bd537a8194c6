"""A random-weight two-layer Llama with a locally built tokenizer: a real model for a real vLLM
on a CPU, made in seconds with no download (``python -m fleetslo.engine.tinymodel DIR``).

Its weights are random, so its text is noise; what matters for fleetslo is that vLLM loads it
through the ordinary Hugging Face path (config, safetensors, tokenizer, chat template) and runs
the same scheduler, KV cache and API server as for any model. The sizes respect what vLLM's CPU
backend accepts (``head_dim`` 64: 16 is rejected) and stay small enough that a step is milliseconds.

Needs ``transformers`` and ``tokenizers`` (present wherever vLLM is); imported only when called.
This module must not start vLLM or know anything of the fleet.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

#: The model's shape: two layers, ~19M parameters (75 MB in fp32), so that one CPU core takes
#: milliseconds per decode step and the engine, not the API server, sets the pace (with a much
#: smaller model every token is ready before the server has streamed the previous one).
SHAPE: dict[str, int] = {
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 2,
    "num_attention_heads": 12,
    "num_key_value_heads": 4,
    "max_position_embeddings": 4096,
}
VOCAB_SIZE = 1024
#: Marks a finished model folder: a half-written one (killed builder) is rebuilt, never served.
DONE_MARK = ".fleetslo-tinymodel"
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def _corpus() -> list[str]:
    """Deterministic training text for the tokenizer: enough distinct words for a ~1K vocabulary."""
    words = [f"{a}{b}{c}" for a in "bcdfghklmnprst" for b in "aeiou" for c in "nrst"]
    return [" ".join(words[i : i + 16]) for i in range(0, len(words), 4)] * 4


def build_tokenizer(folder: Path) -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    from tokenizers import decoders

    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="</s>"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    return fast


def build(folder: Path, seed: int = 0) -> Path:
    """Write the model into ``folder`` (created); a folder already built is reused as it is."""
    if (folder / DONE_MARK).exists():
        return folder
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(folder)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
        tie_word_embeddings=False,
        **SHAPE,
    )
    LlamaForCausalLM(config).save_pretrained(folder, safe_serialization=True)
    (folder / DONE_MARK).write_text("built by fleetslo.engine.tinymodel\n", encoding="utf-8")
    return folder


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m fleetslo.engine.tinymodel DIR", file=sys.stderr)
        return 2
    print(build(Path(argv[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
