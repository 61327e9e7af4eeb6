"""docs/op-coverage.md is the published coverage of the analytic counter: an op listed as counted (or as having
no FLOPs by nature) must still be treated so, or the table would promise what the counter no longer does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from pytest_roofline.counters.audit import GROUPS, group_of

DOC = Path(__file__).resolve().parents[1] / "docs" / "op-coverage.md"


def listed() -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    current = None
    for line in DOC.read_text().splitlines():
        heading = re.match(r"^## (.+) \(\d+\)$", line)
        if heading:
            current = heading.group(1)
            groups[current] = []
        elif current:
            groups[current] += re.findall(r"`([^`]+)`", line)
    return groups


def resolve(name: str) -> object | None:
    namespace, packet, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), packet, None), overload, None)


def test_the_document_lists_every_group_with_its_count() -> None:
    groups = listed()
    assert list(groups) == list(GROUPS)
    assert sum(len(names) for names in groups.values()) >= 400  # PyTorch's op_db reaches hundreds of overloads


@pytest.mark.parametrize("group", ["counted", "no FLOPs by nature"])
def test_ops_the_document_promises_are_still_treated_so(group: str) -> None:
    names = listed()[group]
    changed = {name: group_of(op) for name in names if (op := resolve(name)) is not None and group_of(op) != group}
    assert changed == {}, f"regenerate docs/op-coverage.md if this is intended: {changed}"


def test_a_rule_for_an_op_moves_it_out_of_without_a_rule() -> None:
    assert group_of(torch.ops.aten._transformer_encoder_layer_fwd.default) == "counted"
    assert group_of(torch.ops.aten._fft_r2c.default) == "without a rule"
    assert group_of(torch.ops.aten.cat.default) == "no FLOPs by nature"
