"""PySpark jobs over the same stage code: trace ingestion (Glue 5.0) and the corpus stage's
normalise + dedup (EMR Serverless). Spark only decides where partitions run; every row is
made by the functions the local path calls."""
