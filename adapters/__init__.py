"""Everything that touches the outside world (Spark, the SQL store, alert hooks); not built yet."""
