"""Source adapters without Spark: positions from real progress JSON, the new run's options, refusals.

Each adapter answers where the old run stands in event time and how the new
run starts there (``adapters/spark/sources``). These are the pure parts:
offsets as Spark writes them in ``sources[i].endOffset`` (Kafka's from a
real progress event's shape — no broker runs here), and the one-line
refusals of sources GenMig cannot migrate.
"""

from __future__ import annotations

import json

import pytest

from armd.adapters.spark.listener import ProgressRecord
from armd.adapters.spark.sources import OldRun, SourceContractError, adapter_for, check_sources, replays
from armd.adapters.spark.sources.kafka import starting_offsets

# A Kafka source's progress as Spark 4 writes it (StreamingQueryProgress.json), two topics, three partitions.
KAFKA_PROGRESS = """{
  "id" : "4b1f0f5e-8c2a-4f0e-9a55-0d1c1b0f3a11", "runId" : "a0c2e7d4-3c55-4c6f-8d4f-2f9f7b2d7e10",
  "name" : "clicks@0", "timestamp" : "2031-03-07T09:00:12.004Z", "batchId" : 41, "batchDuration" : 812,
  "numInputRows" : 733, "inputRowsPerSecond" : 610.3, "processedRowsPerSecond" : 902.7,
  "durationMs" : { "addBatch" : 640, "commitOffsets" : 21, "getBatch" : 0, "latestOffset" : 9,
                   "queryPlanning" : 14, "triggerExecution" : 812, "walCommit" : 25 },
  "eventTime" : { "avg" : "2031-03-07T08:59:58.610Z", "max" : "2031-03-07T09:00:03.250Z",
                  "min" : "2031-03-07T08:59:51.020Z", "watermark" : "2031-03-07T08:59:55.000Z" },
  "stateOperators" : [ ],
  "sources" : [ {
    "description" : "KafkaV2[Subscribe[clicks, views]]",
    "startOffset" : { "clicks" : { "0" : 18211, "1" : 18107 }, "views" : { "0" : 4410 } },
    "endOffset" : { "clicks" : { "0" : 18512, "1" : 18399 }, "views" : { "0" : 4551 } },
    "latestOffset" : { "clicks" : { "0" : 18512, "1" : 18399 }, "views" : { "0" : 4551 } },
    "numInputRows" : 733, "inputRowsPerSecond" : 610.3, "processedRowsPerSecond" : 902.7,
    "metrics" : { "avgOffsetsBehindLatest" : "0.0", "maxOffsetsBehindLatest" : "0", "minOffsetsBehindLatest" : "0" }
  } ],
  "sink" : { "description" : "ForeachBatchSink", "numOutputRows" : 12 }
}"""
KAFKA = {"format": "kafka", "kafka.bootstrap.servers": "broker:9092", "subscribe": "clicks,views",
         "startingOffsets": "earliest", "startingTimestamp": "1"}


def test_kafka_new_run_starts_at_the_old_runs_end_offsets_and_is_placed_by_its_largest_event_time():
    record = ProgressRecord.from_json(0, json.loads(KAFKA_PROGRESS))
    old = OldRun(record.sources[0].end_offset, record.event_max.timestamp(), record.sources[0].description)
    adapter = adapter_for("clicks", KAFKA)
    position = adapter.position("clicks", KAFKA, old)
    assert position == record.event_max.timestamp() == 1930640403.25  # 2031-03-07T09:00:03.250Z
    start = adapter.start("clicks", KAFKA, old, position)
    assert json.loads(start.options["startingOffsets"]) == {"clicks": {"0": 18512, "1": 18399}, "views": {"0": 4551}}
    assert "startingTimestamp" not in start.options  # it would start the new run elsewhere
    assert start.options["subscribe"] == "clicks,views" and start.options["kafka.bootstrap.servers"] == "broker:9092"


@pytest.mark.parametrize("offset, message", [
    ('{"clicks": {"0": -1}}', "must be >= 0"),
    ('{"clicks": {"zero": 5}}', "whole numbers"),
    ('{"clicks": {}}', "no partitions"),
    ('[1, 2]', "is not"),
])
def test_kafka_end_offsets_that_cannot_start_a_run_are_refused(offset, message):
    with pytest.raises(SourceContractError, match=message):
        starting_offsets("clicks", offset)


def test_kafka_without_a_watermark_cannot_be_placed_in_event_time():
    record = ProgressRecord.from_json(0, {**json.loads(KAFKA_PROGRESS), "eventTime": {}})
    old = OldRun(record.sources[0].end_offset, None)
    with pytest.raises(SourceContractError, match="must set a watermark"):
        adapter_for("clicks", KAFKA).position("clicks", KAFKA, old)


RATE = {"format": "rate-micro-batch", "rowsPerBatch": "20", "startTimestamp": "1930640400000", "advanceMillisPerBatch": "500"}


def test_rate_micro_batch_is_placed_by_its_offset_timestamp_and_restarted_there_with_values_shifted():
    old = OldRun(json.dumps({"offset": 260, "timestamp": 1930640406500}))  # after 13 batches of 20 rows, 500 ms each
    adapter = adapter_for("ticks", RATE)
    position = adapter.position("ticks", RATE, old)
    assert position == 1930640406.5
    start = adapter.start("ticks", RATE, old, position)
    assert start.options["startTimestamp"] == "1930640406500" and json.loads(start.options["armd_add"]) == {"value": 260}
    assert start.options["rowsPerBatch"] == "20" and start.options["advanceMillisPerBatch"] == "500"
    # A run started by a migration migrates again: its values were already shifted, the shifts add up.
    again = adapter.start("ticks", start.options, OldRun(json.dumps({"offset": 40, "timestamp": 1930640407500})), 0.0)
    assert json.loads(again.options["armd_add"]) == {"value": 300} and again.options["startTimestamp"] == "1930640407500"


def test_rate_micro_batch_whose_time_stands_still_is_refused():
    with pytest.raises(SourceContractError, match="advanceMillisPerBatch = 0"):
        adapter_for("ticks", {**RATE, "advanceMillisPerBatch": "0"})


FILES = {"format": "json", "path": "/data/clicks", "schema": "event_time TIMESTAMP, key BIGINT", "event_time_column": "event_time"}


def test_a_file_source_rereads_its_directory_keeping_rows_from_the_old_runs_largest_event_time():
    old = OldRun('{"logOffset":7}', 1930640403.25, "FileStreamSource[file:/data/clicks]")
    adapter = adapter_for("clicks", FILES)
    position = adapter.position("clicks", FILES, old)
    assert position == 1930640403.25
    start = adapter.start("clicks", FILES, old, position)
    assert float(start.options["armd_since_seconds"]) == position and start.options["path"] == "/data/clicks"


@pytest.mark.parametrize("options, message", [
    ({**FILES, "event_time_column": ""}, "event_time_column"),
    ({"format": "csv", "event_time_column": "t"}, "'path'"),
    ({**FILES, "cleanSource": "delete"}, "cleanSource"),
])
def test_file_sources_genmig_cannot_replay_are_refused(options, message):
    with pytest.raises(SourceContractError, match=message):
        adapter_for("clicks", options)


SYNTHETIC = {"start": "1930640400.0", "schedule": '{"rate_per_second": 5}', "keys": "3"}


def test_the_synthetic_source_is_placed_by_its_event_time_offset_after_its_origin():
    old = OldRun('{"stream": "clicks", "event_ms": 12000}')
    adapter = adapter_for("clicks", SYNTHETIC)
    assert adapter.position("clicks", SYNTHETIC, old) == 1930640412.0
    assert adapter.start("clicks", SYNTHETIC, old, 1930640412.0).options["starting_seconds"] == "12.0"
    with pytest.raises(SourceContractError, match="not this stream's"):
        adapter.position("clicks", SYNTHETIC, OldRun('{"stream": "views", "event_ms": 12000}'))


def test_sources_that_replay_start_a_new_run_at_any_earlier_event_time():
    synthetic = adapter_for("clicks", {**SYNTHETIC, "starting_seconds": "12.0"})
    assert replays(synthetic)
    assert synthetic.replay("clicks", SYNTHETIC, 1930640403.5).options["starting_seconds"] == "3.5"
    assert synthetic.replay("clicks", SYNTHETIC, 1930640390.0).options["starting_seconds"] == "0.0"  # not before the origin
    assert "catch_up_seconds" not in synthetic.replay("clicks", SYNTHETIC, 1930640403.5).options
    backlog = synthetic.replay("clicks", SYNTHETIC, 1930640403.5, until=1930640419.5).options
    assert (backlog["starting_seconds"], backlog["catch_up_seconds"]) == ("3.5", "19.5")  # the old run's position
    files = adapter_for("clicks", FILES)
    assert replays(files) and float(files.replay("clicks", FILES, 1930640390.0).options["armd_since_seconds"]) == 1930640390.0


def test_sources_whose_new_run_can_only_start_at_the_old_runs_offsets_do_not_replay():
    assert not replays(adapter_for("clicks", KAFKA))
    assert not replays(adapter_for("n", {"format": "rate-micro-batch", "rowsPerBatch": "5"}))


@pytest.mark.parametrize("options, message", [
    ({"format": "socket", "host": "localhost", "port": "9999"}, "GenMig cannot migrate a 'socket' source: not replayable"),
    ({"format": "rate", "rowsPerSecond": "5"}, "use rate-micro-batch"),
    ({"format": "delta", "path": "/t"}, "does not know source format 'delta'"),
    ({"format": "kafka", "kafka.bootstrap.servers": "b:9092"}, "exactly one of subscribe"),
    ({"format": "ticks", "data_source": "support.user_source:Undeclared"}, "does not declare the GenMig contract"),
    ({"format": "ticks", "data_source": "support.user_source:Nowhere"}, "has no attribute"),
])
def test_sources_that_break_the_contract_are_refused_in_one_line(options, message):
    with pytest.raises(SourceContractError, match=message) as caught:
        check_sources({"clicks": options})
    assert "\n" not in str(caught.value) and "'clicks'" in str(caught.value)
