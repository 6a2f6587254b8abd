"""swemill.aws: the AWS Batch child, the Step Functions state machine, the infrastructure."""
