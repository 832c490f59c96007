"""The Spark side of samsa: a PySpark data source named ``samsa`` (see pipeline/README.md).

``samsa.pipeline.options``, ``.ranges`` and ``.client`` import without PySpark;
``SamsaDataSource`` (``samsa.pipeline.source``) needs it and is imported on first use:

    from samsa.pipeline import SamsaDataSource
    spark.dataSource.register(SamsaDataSource)
"""

__all__ = ["SamsaDataSource", "register"]


def __getattr__(name):
    if name == "SamsaDataSource":
        from .source import SamsaDataSource
        return SamsaDataSource
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")


def register(spark) -> None:
    """Make ``format("samsa")`` available in this Spark session."""
    from .source import SamsaDataSource
    spark.dataSource.register(SamsaDataSource)
