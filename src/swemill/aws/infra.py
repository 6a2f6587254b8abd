"""The CloudFormation template (``infra/swemill.yaml``), generated so it cannot drift from
the code: the state machine is :func:`swemill.aws.stepfunctions.state_machine`, the Glue
tables' columns come from the Parquet schemas the stages write.

    python -m swemill.aws.infra > infra/swemill.yaml     (a test checks the file is current)

What it makes: the bucket (``golden/`` and ``candidates/`` denied to every principal but the
grader role), the IAM roles, a Spot compute environment with its queue and the worker job
definition, the EMR
Serverless application, the Glue ingest job, the Glue Data Catalog tables over ``traces/``,
``tasks/``, ``candidates/`` and ``corpus/`` (partitioned by ``run_id``), and the state machine.
"""

from __future__ import annotations

import sys
from typing import Any

import pyarrow as pa
import yaml

from swemill.aws.stepfunctions import state_machine
from swemill.core.records import CandidateRecord, Task
from swemill.corpus.rows import DPO_SCHEMA, SFT_SCHEMA
from swemill.store import schema_for_model
from swemill.traces.ingest import state_schema
from swemill.validate.difficulty import TaskDifficulty

__all__ = ["template", "render", "hive_type", "glue_columns", "CATALOG_TABLES"]

CATALOG_TABLES = {"traces": "traces", "tasks": "tasks", "candidates": "candidates",
                  "difficulty": "difficulty", "corpus_sft": "corpus/sft",
                  "corpus_dpo": "corpus/dpo"}


def hive_type(t: pa.DataType) -> str:
    """The Glue/Athena type of an Arrow type (JSON extension columns are strings)."""
    if isinstance(t, pa.BaseExtensionType):
        return hive_type(t.storage_type)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        return "bigint" if t.bit_width > 32 or pa.types.is_unsigned_integer(t) else "int"
    if pa.types.is_floating(t):
        return "double"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return f"array<{hive_type(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ",".join(f"{f.name}:{hive_type(f.type)}" for f in t) + ">"
    if pa.types.is_timestamp(t):
        return "timestamp"
    raise ValueError(f"no Glue type for Arrow type {t}")


def _schemas() -> dict[str, pa.Schema]:
    return {"traces": state_schema(), "tasks": schema_for_model(Task),
            "candidates": schema_for_model(CandidateRecord),
            "difficulty": schema_for_model(TaskDifficulty),
            "corpus_sft": SFT_SCHEMA, "corpus_dpo": DPO_SCHEMA}


def glue_columns(schema: pa.Schema) -> list[dict[str, str]]:
    return [{"Name": f.name.lower(), "Type": hive_type(f.type)} for f in schema
            if f.name != "run_id"]


def _ref(name: str) -> dict[str, str]:
    return {"Ref": name}


def _arn(name: str) -> dict[str, list[str]]:
    return {"Fn::GetAtt": [name, "Arn"]}


def _sub(text: str) -> dict[str, str]:
    return {"Fn::Sub": text}


def _role(service: str | list[str], statements: list[dict[str, Any]],
          managed: list[Any] | None = None) -> dict[str, Any]:
    services = [service] if isinstance(service, str) else service
    props: dict[str, Any] = {"AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": services}, "Action": "sts:AssumeRole"}]}}
    if statements:
        props["Policies"] = [{"PolicyName": "swemill", "PolicyDocument": {
            "Version": "2012-10-17", "Statement": statements}}]
    if managed:
        props["ManagedPolicyArns"] = managed
    return {"Type": "AWS::IAM::Role", "Properties": props}


def _s3(actions: list[str], *prefixes: str) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": actions,
            "Resource": [_sub(f"${{Bucket.Arn}}/{p}") for p in prefixes]}


_LIST = {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": _arn("Bucket")}
_RW = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]


def _roles() -> dict[str, Any]:
    aws = "arn:${AWS::Partition}:iam::aws:policy"
    return {
        # the stage jobs of tasks and rollouts submit their own array jobs (the fan-out)
        "GraderRole": _role(["ecs-tasks.amazonaws.com", "emr-serverless.amazonaws.com"],
                            [_LIST, _s3(_RW, "*"), {
                                "Effect": "Allow", "Action": [
                                    "batch:SubmitJob", "batch:DescribeJobs",
                                    "batch:TerminateJob", "batch:TagResource"],
                                "Resource": "*"}]),
        "BedrockBatchRole": _role("bedrock.amazonaws.com", [
            _LIST, _s3(["s3:GetObject"], "replay/*"), _s3(["s3:PutObject"], "replay/*")]),
        "GlueRole": _role("glue.amazonaws.com", [
            _LIST, _s3(_RW, "traces/*", "trajectories/*", "quarantine/*", "manifests/*",
                       "jobs/*")], [_sub(f"{aws}/service-role/AWSGlueServiceRole")]),
        "BatchServiceRole": _role("batch.amazonaws.com", [], [
            _sub(f"{aws}/service-role/AWSBatchServiceRole")]),
        "InstanceRole": _role("ec2.amazonaws.com", [], [
            _sub(f"{aws}/service-role/AmazonEC2ContainerServiceforEC2Role")]),
        "InstanceProfile": {"Type": "AWS::IAM::InstanceProfile",
                            "Properties": {"Roles": [_ref("InstanceRole")]}},
        "StepFunctionsRole": _role("states.amazonaws.com", [
            {"Effect": "Allow", "Action": ["batch:SubmitJob", "batch:DescribeJobs",
                                           "batch:TerminateJob", "batch:TagResource"],
             "Resource": "*"},
            {"Effect": "Allow", "Action": ["events:PutTargets", "events:PutRule",
                                           "events:DescribeRule"], "Resource": "*"},
            {"Effect": "Allow", "Action": ["emr-serverless:StartJobRun",
                                           "emr-serverless:GetJobRun",
                                           "emr-serverless:CancelJobRun",
                                           "emr-serverless:TagResource"], "Resource": "*"},
            {"Effect": "Allow", "Action": ["glue:StartJobRun", "glue:GetJobRun",
                                           "glue:BatchStopJobRun"], "Resource": "*"},
            {"Effect": "Allow", "Action": "iam:PassRole", "Resource": _arn("GraderRole")},
            _s3(["s3:PutObject"], "reports/*"),
        ]),
    }


def _bucket() -> dict[str, Any]:
    deny_golden = {  # candidates/ names the function each task's bug is in
        "Sid": "GoldenOnlyForTheGrader", "Effect": "Deny", "Principal": "*",
        "Action": "s3:*", "Resource": [_sub("${Bucket.Arn}/golden/*"),
                                       _sub("${Bucket.Arn}/candidates/*")],
        "Condition": {"ArnNotEquals": {"aws:PrincipalArn": _arn("GraderRole")}},
    }
    tls = {"Sid": "TlsOnly", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
           "Resource": [_arn("Bucket"), _sub("${Bucket.Arn}/*")],
           "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
    return {
        "Bucket": {"Type": "AWS::S3::Bucket", "DeletionPolicy": "Retain",
                   "UpdateReplacePolicy": "Retain", "Properties": {
                       "BucketName": _ref("BucketName"),
                       "PublicAccessBlockConfiguration": {
                           "BlockPublicAcls": True, "BlockPublicPolicy": True,
                           "IgnorePublicAcls": True, "RestrictPublicBuckets": True},
                       "BucketEncryption": {"ServerSideEncryptionConfiguration": [
                           {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms"}}]}}},
        "BucketPolicy": {"Type": "AWS::S3::BucketPolicy", "Properties": {
            "Bucket": _ref("Bucket"),
            "PolicyDocument": {"Version": "2012-10-17", "Statement": [deny_golden, tls]}}},
    }


def _batch() -> dict[str, Any]:
    return {
        "SpotCompute": {"Type": "AWS::Batch::ComputeEnvironment", "Properties": {
            "Type": "MANAGED", "State": "ENABLED", "ServiceRole": _arn("BatchServiceRole"),
            "ComputeResources": {
                "Type": "SPOT", "AllocationStrategy": "SPOT_PRICE_CAPACITY_OPTIMIZED",
                "MinvCpus": 0, "MaxvCpus": _ref("MaxvCpus"), "InstanceTypes": ["optimal"],
                "Subnets": _ref("Subnets"), "SecurityGroupIds": _ref("SecurityGroups"),
                "InstanceRole": _arn("InstanceProfile")}}},
        "JobQueue": {"Type": "AWS::Batch::JobQueue", "Properties": {
            "Priority": 1, "State": "ENABLED", "ComputeEnvironmentOrder": [
                {"Order": 1, "ComputeEnvironment": _ref("SpotCompute")}]}},
        "WorkerJob": {"Type": "AWS::Batch::JobDefinition", "Properties": {
            "Type": "container", "PlatformCapabilities": ["EC2"],
            "RetryStrategy": {"Attempts": 3, "EvaluateOnExit": [
                {"OnExitCode": "2", "Action": "EXIT"}, {"OnReason": "*", "Action": "RETRY"}]},
            "Timeout": {"AttemptDurationSeconds": 7200},
            "ContainerProperties": {
                "Image": _ref("WorkerImage"), "JobRoleArn": _arn("GraderRole"),
                "Command": ["swemill", "aws", "batch-child"],
                "ResourceRequirements": [{"Type": "VCPU", "Value": "2"},
                                         {"Type": "MEMORY", "Value": "8192"}],
                # bubblewrap needs user namespaces; the container itself stays unprivileged.
                "LinuxParameters": {"InitProcessEnabled": True},
                "Environment": [{"Name": "SWEMILL_STORE", "Value": _sub("s3://${Bucket}/")}]}}},
    }


def _analytics() -> dict[str, Any]:
    out: dict[str, Any] = {
        "SparkApp": {"Type": "AWS::EMRServerless::Application", "Properties": {
            "Name": "swemill-corpus", "Type": "SPARK", "ReleaseLabel": "emr-7.5.0",
            "AutoStopConfiguration": {"Enabled": True, "IdleTimeoutMinutes": 15},
            "MaximumCapacity": {"Cpu": "64 vCPU", "Memory": "256 GB"}}},
        "IngestJob": {"Type": "AWS::Glue::Job", "Properties": {
            "Name": "swemill-traces-ingest", "Role": _arn("GlueRole"), "GlueVersion": "5.0",
            "WorkerType": "G.1X", "NumberOfWorkers": 2,
            "Command": {"Name": "glueetl", "PythonVersion": "3",
                        "ScriptLocation": _sub("s3://${Bucket}/jobs/traces_job.py")},
            "DefaultArguments": {"--additional-python-modules": "swemill[s3]"}}},
        "Catalog": {"Type": "AWS::Glue::Database", "Properties": {
            "CatalogId": _ref("AWS::AccountId"),
            "DatabaseInput": {"Name": "swemill", "Description": "swemill runs, by run_id"}}},
    }
    for name, schema in _schemas().items():
        prefix = CATALOG_TABLES[name]
        out["Table" + name.title().replace("_", "")] = {
            "Type": "AWS::Glue::Table", "Properties": {
                "CatalogId": _ref("AWS::AccountId"), "DatabaseName": _ref("Catalog"),
                "TableInput": {
                    "Name": name, "TableType": "EXTERNAL_TABLE",
                    "Parameters": {"classification": "parquet"},
                    "PartitionKeys": [{"Name": "run_id", "Type": "string"}],
                    "StorageDescriptor": {
                        "Location": _sub(f"s3://${{Bucket}}/{prefix}/"),
                        "Columns": glue_columns(schema),
                        "InputFormat":
                            "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
                        "OutputFormat":
                            "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
                        "SerdeInfo": {"SerializationLibrary":
                                      "org.apache.hadoop.hive.ql.io.parquet.serde."
                                      "ParquetHiveSerDe"}}}}}
    return out


def template() -> dict[str, Any]:
    resources = {**_bucket(), **_roles(), **_batch(), **_analytics()}
    resources["Pipeline"] = {"Type": "AWS::StepFunctions::StateMachine", "Properties": {
        "StateMachineName": "swemill-build", "RoleArn": _arn("StepFunctionsRole"),
        "Definition": state_machine()}}
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "swemill on AWS: store, Spot Batch workers, EMR Serverless, Glue "
                       "catalog and the build state machine (generated by swemill.aws.infra)",
        "Parameters": {
            "BucketName": {"Type": "String", "Description": "The store's bucket"},
            "WorkerImage": {"Type": "String",
                            "Description": "ECR URI of the worker image (Dockerfile)"},
            "Subnets": {"Type": "List<AWS::EC2::Subnet::Id>"},
            "SecurityGroups": {"Type": "List<AWS::EC2::SecurityGroup::Id>"},
            "MaxvCpus": {"Type": "Number", "Default": 256, "MinValue": 2},
        },
        "Resources": resources,
        "Outputs": {
            "JobQueue": {"Value": _ref("JobQueue")},
            "JobDefinition": {"Value": _ref("WorkerJob")},
            "SparkApplicationId": {"Value": _ref("SparkApp")},
            "GraderRoleArn": {"Value": _arn("GraderRole")},
            "BedrockBatchRoleArn": {"Value": _arn("BedrockBatchRole")},
            "StateMachineArn": {"Value": _ref("Pipeline")},
        },
    }


class _NoAliases(yaml.SafeDumper):
    """CloudFormation rejects YAML anchors; repeat shared pieces instead."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render() -> str:
    head = "# Generated by `python -m swemill.aws.infra`; do not edit by hand.\n"
    return head + yaml.dump(template(), Dumper=_NoAliases, sort_keys=False, width=100)


if __name__ == "__main__":
    sys.stdout.write(render())
