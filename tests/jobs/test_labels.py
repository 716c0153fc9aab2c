"""Kubernetes label syntax and the selector rule (clusters.labels)."""

from __future__ import annotations

import pytest

from clusters.labels import (
    SELECTOR_DUPLICATE_KEY,
    SELECTOR_EMPTY,
    SELECTOR_SYNTAX,
    is_valid_label_key,
    is_valid_label_value,
    parse_selector_text,
    selector_problems,
)


@pytest.mark.parametrize(
    "key",
    [
        "app",
        "kubernetes.io/hostname",
        "topology.rlinf.io/cluster",
        "rlinf.io/gpu-model",
        "A_b.c-D",
        "x" * 63,
        "a" * 63 + "." + "b" * 63 + "/name",
    ],
)
def test_valid_label_keys(key: str) -> None:
    assert is_valid_label_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "",
        "/name",
        "prefix/",
        "-app",
        "app-",
        "x" * 64,
        "Upper.Case/name",
        "a/b/c",
        "a b",
        "ключ",
        "rlinf.io/pool\n",
        ("a" * 63 + ".") * 4 + "a/name",
        None,
        7,
    ],
)
def test_invalid_label_keys(key: object) -> None:
    assert not is_valid_label_key(key)


@pytest.mark.parametrize("value", ["a100-a", "a", "A.b_c-1", "x" * 63])
def test_valid_label_values(value: str) -> None:
    assert is_valid_label_value(value)


@pytest.mark.parametrize("value", ["", "-a", "a-", "x" * 64, "a/b", "a=b", "a\n", None, 1])
def test_invalid_label_values(value: object) -> None:
    assert not is_valid_label_value(value)


def test_parse_selector_text_accepts_lines_and_commas() -> None:
    text = "rlinf.io/pool = a100-a, topology.rlinf.io/cluster=gpu-a\n\n  zone=zone-1  \n"
    pairs, unparseable = parse_selector_text(text)
    assert pairs == [
        ("rlinf.io/pool", "a100-a"),
        ("topology.rlinf.io/cluster", "gpu-a"),
        ("zone", "zone-1"),
    ]
    assert unparseable == []


def test_parse_selector_text_reports_parts_without_a_key_and_value() -> None:
    pairs, unparseable = parse_selector_text("pool=a, justakey, =value\nzone=")
    assert pairs == [("pool", "a"), ("zone", "")]
    assert unparseable == ["justakey", "=value"]


def test_parse_selector_text_keeps_duplicates_for_the_rule_to_report() -> None:
    pairs, _ = parse_selector_text("pool=a\npool=b")
    assert [p.code for p in selector_problems(pairs)] == [SELECTOR_DUPLICATE_KEY]


def test_a_clean_selector_has_no_problem() -> None:
    assert selector_problems([("rlinf.io/pool", "a100-a"), ("rlinf.io/zone", "zone-1")]) == []


def test_a_mapping_is_accepted_as_conditions() -> None:
    assert selector_problems({"rlinf.io/pool": "a100-a"}) == []  # type: ignore[arg-type]


def test_no_condition_is_selector_empty() -> None:
    assert [p.code for p in selector_problems([])] == [SELECTOR_EMPTY]


def test_bad_key_is_selector_syntax_with_the_part_named() -> None:
    problems = selector_problems([("-bad", "a")])
    assert [(p.code, p.detail["part"], p.detail["index"]) for p in problems] == [
        (SELECTOR_SYNTAX, "key", 0)
    ]


def test_empty_value_is_selector_syntax() -> None:
    problems = selector_problems([("rlinf.io/pool", "")])
    assert [(p.code, p.detail["part"]) for p in problems] == [(SELECTOR_SYNTAX, "value")]


def test_duplicate_key_lists_every_position_and_value() -> None:
    problems = selector_problems([("pool", "a"), ("zone", "z"), ("pool", "b")])
    assert [p.code for p in problems] == [SELECTOR_DUPLICATE_KEY]
    assert problems[0].detail == {"key": "pool", "indexes": [0, 2], "values": ["a", "b"]}


@pytest.mark.parametrize(
    "pairs",
    [[("a",)], [("a", "b", "c")], ["ab"], [(1, "a")], [("a", None)], [None]],
)
def test_malformed_conditions_are_syntax_problems(pairs: list[object]) -> None:
    assert [p.code for p in selector_problems(pairs)] == [SELECTOR_SYNTAX]  # type: ignore[arg-type]


def test_a_selector_that_is_not_a_list_is_a_syntax_problem() -> None:
    assert [p.code for p in selector_problems("pool=a")] == [SELECTOR_SYNTAX]  # type: ignore[arg-type]


def test_messages_are_plain_text_for_any_input() -> None:
    problems = selector_problems([("k" * 10_000, "v")])
    assert len(problems[0].message) < 500
    assert problems[0].detail["key"] == "k" * 100
