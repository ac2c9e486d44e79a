"""The codebook tables in include/lowbit/formats/codebook_data.h (the six I-quant grids, ggml's
sign table, the IQ4_NL and MXFP4 value tables) are exactly what tools/gen_codebooks.py makes from
gguf-py now: every entry is compared, not just the values' range (tests/cpp/test_formats.cpp)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _helpers import gguf_module

ROOT = Path(__file__).resolve().parents[2]


def test_codebook_data_is_generated_from_gguf(tmp_path: Path) -> None:
    gguf_module("gguf.quants")  # the generator's source: skip (CI: fail) without it
    out = tmp_path / "codebook_data.h"
    subprocess.run([sys.executable, str(ROOT / "tools/gen_codebooks.py"), str(out)], check=True, capture_output=True)

    def tables(text: str) -> str:  # all but the first line, which names the gguf-py version
        return text.split("\n", 1)[1]

    committed = tables((ROOT / "include/lowbit/formats/codebook_data.h").read_text())
    generated = tables(out.read_text())
    assert generated.count("#define LOWBIT_") == 9 + 6  # nine tables, six grid sizes
    assert committed == generated, "codebook_data.h differs from gguf-py's tables (tools/gen_codebooks.py)"
