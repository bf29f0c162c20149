"""What a user declares to the agent, checked before anything runs: ranges, the sink's shape; one clear line each."""

from __future__ import annotations

import pytest

from armd.adapters.spark.managed import QueryParams
from armd.agent.settings import AgentError, Range, Settings, interval, seconds
from armd.agent.sink import read_sink


def test_durations_read_as_spark_and_people_write_them():
    assert [seconds(v, "x") for v in ("15 seconds", "1 minute", "500ms", "1.5 seconds", 2)] == [15, 60, 0.5, 1.5, 2]
    assert interval(0.5) == "500 milliseconds" and interval(600) == "600000 milliseconds"
    with pytest.raises(AgentError, match="'soon' is not a duration"):
        seconds("soon", "windows['w'] min")
    with pytest.raises(AgentError, match="min '10 minutes' is larger than max '1 minute'"):
        Range.parse(("10 minutes", "1 minute"), "windows['w']")
    with pytest.raises(AgentError, match=r"give a \(min, max\) pair"):
        Range.parse("1 minute", "windows['w']")


def test_the_builder_sees_the_settings_in_force_as_spark_intervals():
    params = QueryParams(windows={"q.w": 600.0}, granularity=30.0, extra={"nodes": {"w": "q.w"}})
    s = Settings(None, params, {"w": Range(60, 600)}, {"w": Range(15, 60)})
    assert (s.window("w"), s.slide("w")) == ("600000 milliseconds", "30000 milliseconds")
    tumbling = Settings(None, QueryParams(windows={"q.w": 90.0}, extra={"nodes": {"w": "q.w"}}), {"w": Range(60, 600)}, {})
    assert tumbling.slide("w") == tumbling.window("w") == "90000 milliseconds"
    with pytest.raises(AgentError, match=r"declares windows \['w'\]; add 'v'"):
        s.window("v")


def test_a_foreach_batch_sink_is_read_with_its_output_mode_and_trigger():
    def write(df, batch_id):
        pass

    writer = read_sink("q", lambda df: df.writeStream.outputMode("update").trigger(processingTime="2 seconds").foreachBatch(write))
    assert (writer.function, writer.output_mode, writer.trigger_args) == (write, "update", {"processingTime": "2 seconds"})


@pytest.mark.parametrize("sink, message", [
    (lambda df: df.writeStream.format("console"), "writeStream.format, which the agent cannot run under GenMig"),
    (lambda df: df.writeStream.option("checkpointLocation", "/x").foreachBatch(print), "the agent chooses each run's checkpoint"),
    (lambda df: df.select("a").writeStream.foreachBatch(print), "the sink uses df.select"),
    (lambda df: df.writeStream.outputMode("append"), "names no foreachBatch function"),
    (lambda df: df.writeStream.foreachBatch(print).start(), "writeStream.start"),
])
def test_other_sinks_are_refused_in_one_line(sink, message):
    with pytest.raises(AgentError, match=message) as caught:
        read_sink("q", sink)
    assert "\n" not in str(caught.value)
