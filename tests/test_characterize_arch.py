"""Compiler flags and vector widths per architecture and compiler (no ARM machine here: all offline)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_roofline.characterize import arch

GCC = {"-march=native", "-mcpu=native", "-msve-vector-bits=256", "-msve-vector-bits=512"}
CLANG_14_ARM = {"-mcpu=native", "-msve-vector-bits=256"}  # clang < 15 rejects -march=native on aarch64


def accepts(flags: set[str]) -> Callable[[str], bool]:
    return flags.__contains__


@pytest.mark.parametrize(("isa", "widths"), [
    (["sse2", "avx", "avx2", "fma", "avx512f"], (16, 32, 64)),  # Intel AVX-512, AMD Zen 4
    (["sse2", "avx", "avx2", "fma"], (16, 32)),                 # AMD Zen 3: AVX2 only
    (["sse2"], (16,)),
])
def test_x86_uses_march_native_and_the_isa_widths(isa: list[str], widths: tuple[int, ...]) -> None:
    chosen = arch.select("x86_64", isa, accepts(GCC))
    assert chosen.flags == ("-march=native",) and chosen.widths == widths


def test_x86_compiler_without_march_native_falls_back_to_generic_sse2() -> None:
    chosen = arch.select("x86_64", ["avx2", "avx512f"], accepts(set()))
    assert chosen.flags == () and chosen.widths == (16,) and "generic" in chosen.vector_source


@pytest.mark.parametrize("compiler", [GCC, CLANG_14_ARM])
def test_aarch64_neon_uses_mcpu_native(compiler: set[str]) -> None:
    chosen = arch.select("aarch64", ["asimd"], accepts(compiler))
    assert chosen.flags == ("-mcpu=native",) and chosen.widths == (16,)
    assert chosen.vector_source == "-mcpu=native; NEON 128-bit"


def test_aarch64_sve_256_adds_a_fixed_length_width() -> None:
    chosen = arch.select("aarch64", ["asimd", "sve"], accepts(GCC), sve_bytes=32)  # Neoverse V1 / Graviton3
    assert chosen.flags == ("-mcpu=native", "-msve-vector-bits=256") and chosen.widths == (16, 32)
    assert "SVE 256-bit" in chosen.vector_source


def test_aarch64_sve_flag_rejected_or_length_unknown_stays_neon() -> None:
    rejected = arch.select("aarch64", ["asimd", "sve"], accepts({"-mcpu=native"}), sve_bytes=64)
    assert rejected.widths == (16,) and "rejects -msve-vector-bits=512" in rejected.vector_source
    unknown = arch.select("arm64", ["asimd", "sve"], accepts(GCC), sve_bytes=None)
    assert unknown.widths == (16,) and "SVE length unknown" in unknown.vector_source
    a64fx = arch.select("aarch64", ["asimd", "sve"], accepts(GCC), sve_bytes=16)
    assert a64fx.widths == (16,)


def test_aarch64_without_any_native_flag_is_a_recorded_fallback() -> None:
    chosen = arch.select("aarch64", ["asimd"], accepts(set()))
    assert chosen.flags == () and chosen.widths == (16,) and "generic aarch64" in chosen.vector_source


def test_other_architectures_try_march_then_mcpu_then_nothing() -> None:
    assert arch.select("ppc64le", [], accepts({"-mcpu=native"})).flags == ("-mcpu=native",)
    assert arch.select("riscv64", [], accepts({"-march=native"})).flags == ("-march=native",)
    assert "no native tuning flag" in arch.select("s390x", [], accepts(set())).vector_source


def test_sve_length_file(tmp_path: Path) -> None:
    (tmp_path / "len").write_text("32\n")
    assert arch.sve_vector_bytes(tmp_path / "len") == 32
    assert arch.sve_vector_bytes(tmp_path / "absent") is None
