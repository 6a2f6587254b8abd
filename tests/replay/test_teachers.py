"""Teacher specs and the pool's rules: heterogeneity, the student's family, credentials."""

from __future__ import annotations

import pytest

from swemill.core.errors import ConfigError, PolicyError
from swemill.replay.teachers import TeacherPool, check_credentials, parse_teacher, parse_teachers


def test_specs_name_provider_model_url_family_and_price() -> None:
    t = parse_teacher("openai:qwen3-coder@http://127.0.0.1:9/v1#price=0.5/1.5")
    assert (t.provider, t.model, t.family, t.base_url) == (
        "openai", "qwen3-coder", "qwen", "http://127.0.0.1:9/v1")
    assert (t.price.input, t.price.output) == (0.5, 1.5)  # type: ignore[union-attr]
    b = parse_teacher("bedrock-batch:us.meta.llama3-3-70b-instruct-v1:0")
    assert (b.provider, b.model, b.family, b.batch) == (
        "bedrock-batch", "us.meta.llama3-3-70b-instruct-v1:0", "meta", True)
    assert b.price is not None  # from the price table
    assert parse_teacher("anthropic:my-finetune").family == "anthropic"
    assert parse_teacher("openai:house-model@http://10.0.0.2/v1#family=acme").family == "acme"
    assert parse_teacher("openrouter:deepseek/deepseek-chat").family == "deepseek"


@pytest.mark.parametrize("spec, words", [
    ("vertex:gemini-2.5-pro", "unknown teacher provider"),
    ("gpt-4o", "unknown teacher provider"),
    ("openai:", "names no model"),
    ("bedrock:nova@http://x", "only openai: and anthropic: take an @URL"),
    ("openai:gpt-4o#temperature=2", "unknown option"),
])
def test_bad_specs_are_one_line_errors(spec: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        parse_teacher(spec)


def test_duplicates_and_empty_lists_are_refused() -> None:
    with pytest.raises(ConfigError, match="listed twice"):
        parse_teachers("openai:gpt-4o,openai:gpt-4o")
    with pytest.raises(ConfigError, match="no teachers"):
        parse_teachers(" , ")


def test_pool_needs_three_families_by_default() -> None:
    one = parse_teachers("openai:gpt-4o,openai:gpt-4.1-mini,openrouter:openai/gpt-5")
    with pytest.raises(ConfigError, match=r"1 model family \(openai\); at least 3"):
        TeacherPool(one)
    two = parse_teachers("openai:gpt-4o,anthropic:claude-haiku-4-5")
    with pytest.raises(ConfigError, match="2 model families"):
        TeacherPool(two)
    assert TeacherPool(two, min_families=2).families == ["anthropic", "openai"]


def test_pool_keeps_the_students_family_out_unless_allowed() -> None:
    specs = parse_teachers("openai:gpt-4o,anthropic:claude-haiku-4-5,"
                           "bedrock:us.meta.llama3-3-70b-instruct-v1:0")
    with pytest.raises(ConfigError, match="student's family 'meta'"):
        TeacherPool(specs, student_family="meta")
    pool = TeacherPool(specs, student_family="meta", allow_student_family=True)
    assert pool.describe()["allow_student_family"] is True
    assert pool.describe()["families"] == ["anthropic", "meta", "openai"]
    assert TeacherPool(specs, student_family="qwen").student_family == "qwen"


def test_unknown_families_must_be_named() -> None:
    specs = parse_teachers("openai:m1@http://127.0.0.1:1/v1,openai:qwen3@http://127.0.0.1:2/v1,"
                           "openai:llama-3@http://127.0.0.1:3/v1")
    with pytest.raises(ConfigError, match="add #family=NAME"):
        TeacherPool(specs)


def test_missing_credentials_are_named_before_any_call() -> None:
    specs = parse_teachers("openai:gpt-4o,anthropic:claude-haiku-4-5,"
                           "bedrock:us.meta.llama3-3-70b-instruct-v1:0,openrouter:qwen/qwen3-coder")
    with pytest.raises(PolicyError) as err:
        check_credentials(specs)
    line = str(err.value)
    assert "4 teacher(s)" in line and "\n" not in line
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AWS credentials", "OPENROUTER_API_KEY"):
        assert name in line
    # Servers on loopback need no key.
    check_credentials(parse_teachers("openai:qwen3@http://127.0.0.1:5/v1"))


def test_credentials_from_the_environment_are_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    check_credentials(parse_teachers("openai:gpt-4o,bedrock-batch:amazon.nova-pro-v1:0"))
