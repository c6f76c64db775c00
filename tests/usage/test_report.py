"""The usage report (usage.report): query validation and OpenAI's page shape."""

from __future__ import annotations

from decimal import Decimal

import pytest

from responses_gateway.errors import InvalidRequestError
from responses_gateway.usage.records import UsageBucket, UsageCounts
from responses_gateway.usage.report import build_page, parse_query

DAY = 86_400
T0 = 1_700_000_000 - 1_700_000_000 % DAY


def _row(hour: int, tenant: str, model: str, key: str, tokens: int) -> UsageBucket:
    counts = UsageCounts(input_tokens=tokens, output_tokens=1, model_calls=1, cost_usd=Decimal(1))
    return UsageBucket(T0 + hour * 3600, tenant, model, key, counts)


ROWS = [
    _row(1, "a", "m1", "k1", 10),
    _row(2, "a", "m2", "k1", 20),
    _row(3, "b", "m1", "k2", 40),
    _row(25, "a", "m1", "k1", 80),
]


def _query(**params: object) -> dict[str, list[str]]:
    return {k: [str(x) for x in v] if isinstance(v, list) else [str(v)] for k, v in params.items()}


def test_daily_buckets_without_grouping_sum_everything() -> None:
    query = parse_query(_query(start_time=T0 + 5, end_time=T0 + 2 * DAY), now=T0 + 3 * DAY)
    assert query.read_range() == (T0, T0 + 2 * DAY)
    page = build_page(query, ROWS)
    assert [(b["start_time"], b["end_time"]) for b in page["data"]] == [
        (T0, T0 + DAY),
        (T0 + DAY, T0 + 2 * DAY),
    ]
    first = page["data"][0]["results"]
    assert [(r["input_tokens"], r["num_model_requests"], r["model"]) for r in first] == [
        (70, 3, None)
    ]
    assert (page["has_more"], page["next_page"]) == (False, None)


def test_group_by_and_filters() -> None:
    query = parse_query(
        _query(start_time=T0, end_time=T0 + DAY, group_by=["project_id", "model"], models="m1"),
        now=T0 + DAY,
    )
    results = build_page(query, ROWS)["data"][0]["results"]
    assert [(r["project_id"], r["model"], r["input_tokens"]) for r in results] == [
        ("a", "m1", 10),
        ("b", "m1", 40),
    ]
    assert all(r["api_key_id"] is None for r in results)


def test_hourly_pages_follow_next_page() -> None:
    params = _query(start_time=T0, end_time=T0 + 4 * 3600, bucket_width="1h", limit=3)
    page = build_page(parse_query(params, now=T0 + DAY), ROWS)
    assert len(page["data"]) == 3 and page["has_more"] is True
    rest = parse_query({**params, "page": [page["next_page"]]}, now=T0 + DAY)
    assert [b["start_time"] for b in build_page(rest, ROWS)["data"]] == [T0 + 3 * 3600]


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({}, "start_time"),
        ({"start_time": "x"}, "start_time"),
        ({"start_time": -(10**40), "end_time": 0}, "start_time"),
        ({"start_time": T0, "end_time": 10**30}, "end_time"),
        ({"start_time": T0, "end_time": T0}, "end_time"),
        ({"start_time": T0, "bucket_width": "1m"}, "bucket_width"),
        ({"start_time": T0, "limit": 32}, "limit"),
        ({"start_time": T0, "bucket_width": "1h", "limit": 169}, "limit"),
        ({"start_time": T0, "group_by": "user_id"}, "group_by"),
        ({"start_time": T0, "page": T0 + 5}, "page"),
    ],
)
def test_bad_queries_are_400_naming_the_parameter(params: dict[str, object], param: str) -> None:
    with pytest.raises(InvalidRequestError) as bad:
        parse_query(_query(**params), now=T0 + 2 * DAY)
    assert bad.value.param == param
