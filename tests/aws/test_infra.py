"""infra/swemill.yaml: current with the code, accepted by cfn-lint, golden/ locked down."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from swemill.aws.infra import _NoAliases, glue_columns, hive_type, render, template

TEMPLATE = Path(__file__).parents[2] / "infra" / "swemill.yaml"


def test_committed_template_is_current() -> None:
    assert TEMPLATE.read_text() == render(), "regenerate: python -m swemill.aws.infra > " \
                                             "infra/swemill.yaml"


@pytest.mark.slow
def test_cfn_lint_accepts_it_and_rejects_a_broken_state_machine(tmp_path: Path) -> None:
    broken = template()
    broken["Resources"]["Pipeline"]["Properties"]["Definition"]["States"]["env"]["Type"] = "Tsk"
    bad = tmp_path / "broken.yaml"
    bad.write_text(yaml.dump(broken, Dumper=_NoAliases, sort_keys=False))
    lint = Path(sys.executable).parent / "cfn-lint"
    good = subprocess.run([str(lint), str(TEMPLATE)], capture_output=True, text=True,
                          timeout=300)
    assert good.returncode == 0, good.stdout + good.stderr
    failed = subprocess.run([str(lint), str(bad)], capture_output=True, text=True, timeout=300)
    assert failed.returncode != 0 and "E3601" in failed.stdout  # the ASL inside is checked


def test_golden_is_denied_to_all_but_the_grader() -> None:
    res = template()["Resources"]
    statements = res["BucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    deny = next(s for s in statements if s["Sid"] == "GoldenOnlyForTheGrader")
    assert deny["Effect"] == "Deny" and deny["Principal"] == "*" and deny["Action"] == "s3:*"
    assert deny["Resource"] == [{"Fn::Sub": "${Bucket.Arn}/golden/*"},
                                {"Fn::Sub": "${Bucket.Arn}/candidates/*"}]
    assert deny["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn":
                                                  {"Fn::GetAtt": ["GraderRole", "Arn"]}}}
    # No other role is granted golden/ explicitly.
    for name in ("BedrockBatchRole", "GlueRole", "StepFunctionsRole"):
        text = repr(res[name])
        assert "golden" not in text and "candidates" not in text, name
        assert "${Bucket.Arn}/*" not in text, name


def test_catalog_tables_partitioned_by_run_id() -> None:
    res = template()["Resources"]
    tables = {r["Properties"]["TableInput"]["Name"]: r["Properties"]["TableInput"]
              for r in res.values() if r["Type"] == "AWS::Glue::Table"}
    assert set(tables) == {"traces", "tasks", "candidates", "difficulty", "corpus_sft",
                           "corpus_dpo"}
    for table in tables.values():
        assert table["PartitionKeys"] == [{"Name": "run_id", "Type": "string"}]
        assert "run_id" not in {c["Name"] for c in table["StorageDescriptor"]["Columns"]}
    sd = tables["tasks"]["StorageDescriptor"]
    assert sd["Location"] == {"Fn::Sub": "s3://${Bucket}/tasks/"}
    assert {"Name": "fail_to_pass", "Type": "array<string>"} in sd["Columns"]
    sd = tables["candidates"]["StorageDescriptor"]
    assert sd["Location"] == {"Fn::Sub": "s3://${Bucket}/candidates/"}
    assert {"Name": "reason", "Type": "string"} in sd["Columns"]
    assert {"Name": "position", "Type": "bigint"} in sd["Columns"]
    sd = tables["difficulty"]["StorageDescriptor"]
    assert {"Name": "pass_at_k", "Type": "array<double>"} in sd["Columns"]
    assert {"Name": "solve_rate", "Type": "double"} in sd["Columns"]


def test_hive_types() -> None:
    import pyarrow as pa

    assert hive_type(pa.list_(pa.struct([("a", pa.int64()), ("b", pa.json_())]))) == \
        "array<struct<a:bigint,b:string>>"
    assert glue_columns(pa.schema([("run_id", pa.string()), ("x", pa.bool_())])) == [
        {"Name": "x", "Type": "boolean"}]
    with pytest.raises(ValueError, match="no Glue type"):
        hive_type(pa.dictionary(pa.int8(), pa.string()))
