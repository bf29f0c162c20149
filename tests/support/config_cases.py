"""One table of configuration mistakes, shared by the loader's tests and the CLI's: each must be one clear line."""

MINIMAL = """
[bounds]
memory_bytes = 1e6
cpu = 100

[plan.streams.clicks]
rate = 0.05
size = 64

[plan.queries.per_second]
op = "aggregate"
groups = 20
inputs = [ { op = "granularity", g = 1000, inputs = [
    { op = "window", id = "clicks_10s", w = 10000, inputs = [ { op = "source", stream = "clicks" } ] } ] } ]
"""

SPARK = "[source]\nkind = 'spark'\n[managed.per_second]\n"
COUNT = "armd.adapters.spark.builders:windowed_count"

# (id, text appended to MINIMAL or (old, new) replaced in it, key path, words naming what is allowed)
MISTAKES = [
    ("unknown section", "[storage]\nurl = 'x'", "storage", "allowed sections: store, model"),
    ("unknown key", "[store]\nurll = 'x'", "store.urll", "allowed keys of [store]: url, retention_days"),
    ("wrong type", "[store]\nretention_days = 'seven'", "store.retention_days", "expected a number > 0 and ≤ 3650 (ten years), got 'seven'"),
    ("negative bound", ("memory_bytes = 1e6", "memory_bytes = -1"), "bounds.memory_bytes", "expected a number > 0"),
    ("missing bound", ("cpu = 100", ""), "bounds.cpu", "missing; expected a number > 0"),
    ("reserve ≥ 1", ("cpu = 100", "cpu = 100\nreserve = 1"), "bounds.reserve", "in [0, 1)"),
    ("unknown policy", "[policy]\nname = 'greedy'", "policy.name", "available: paper-bisection, weighted-qos"),
    (
        "unknown policy parameter",
        "[policy]\nparams = { levels = 3 }",
        "policy.params",
        "its parameters: window_levels, granularity_levels, refinements",
    ),
    ("hysteresis out of range", "[guardrails]\nhysteresis = 1.5", "guardrails.hysteresis", "in [0, 1)"),
    ("max_step 0", "[guardrails]\nmax_step = 0", "guardrails.max_step", "in (0, 1]"),
    ("alpha 0", "[triggers]\nalpha = 0", "triggers.alpha", "in (0, 1]"),
    ("alpha and window", "[triggers]\nalpha = 0.3\nwindow_seconds = 5", "triggers.alpha", "superseded by window_seconds"),
    ("window negative", "[triggers]\nwindow_seconds = -1", "triggers.window_seconds", "≥ 0"),
    ("significance 0", "[triggers]\nsignificance = 0", "triggers.significance", "in (0, 1]"),
    ("forecast min_history 2", "[forecast]\nmin_history = 2", "forecast", "min_history must be ≥ 4"),
    ("price negative", "[migration_cost]\nqos_per_gap_second = -1", "migration_cost.qos_per_gap_second", "≥ 0"),
    (
        "decide < observe",
        "[schedule]\nobserve_seconds = 5\ndecide_seconds = 1",
        "schedule.decide_seconds",
        "≥ observe_seconds (5)",
    ),
    (
        "unset variable",
        "[store]\nurl = 'postgresql+psycopg://armd:${ARMD_DB_PASSWORD}@db/armd'",
        "store.url",
        "ARMD_DB_PASSWORD is not set; set it",
    ),
    (
        "unsupported store",
        "[store]\nurl = 'mysql://armd:pw@db/armd'",
        "store.url",
        "allowed: sqlite:///PATH or postgresql+psycopg://",
    ),
    ("window min > max", "[queries.per_second]\nwindow = [20000, 1000]", "queries.per_second", "1 ≤ min ≤ max"),
    ("window not a pair", "[queries.per_second]\nwindow = 1000", "queries.per_second.window", "a list of two numbers"),
    ("drop rate of 1", "[queries.per_second]\ndrop_rate = [0, 1]", "queries.per_second.drop_rate", "in [0, 1)"),
    ("drop rate low > high", "[queries.per_second]\ndrop_rate = [0.5, 0.2]", "queries.per_second", "0 ≤ low ≤ high < 1"),
    ("QoS for an unknown query", "[queries.per_minute]\nweight = 2", "queries.per_minute", "plan queries: per_second"),
    (
        "unknown window node",
        "[queries.per_second]\nwindows = { nope = [1, 2] }",
        "queries.per_second",
        "its windows: clicks_10s",
    ),
    (
        "source stream not in plan",
        "[source.streams.views]\nrate_per_second = 1",
        "source.streams.views",
        "plan streams: clicks",
    ),
    ("unknown source kind", "[source]\nkind = 'kafka'", "source.kind", "expected one of synthetic, spark"),
    ("managed without Spark", "[managed.per_second]\nbuilder = 'x:y'", "managed", 'only used with source.kind = "spark"'),
    ("Spark without managed queries", "[source]\nkind = 'spark'", "managed.per_second", "needs [managed.NAME] with builder"),
    ("builder not module:function", SPARK + "builder = 'windowed_count'", "managed.per_second.builder", "'module:function'"),
    ("builder not importable", SPARK + "builder = 'no_such_module:build'", "managed.per_second.builder", "cannot import module"),
    ("builder node not in the query", SPARK + f"builder = '{COUNT}'\nnodes = {{ w = 'nope' }}", "managed.per_second.nodes.w",
     "its nodes: clicks_10s.0, clicks_10s"),
    ("unknown sink", SPARK + f"builder = '{COUNT}'\nsink = 'kafka'", "managed.per_second.sink.kind", "one of parquet, sql, memory"),
    ("sql sink without url", SPARK + f"builder = '{COUNT}'\nsink = {{ kind = 'sql' }}", "managed.per_second.sink.url", "missing"),
    ("unknown output mode", SPARK + f"builder = '{COUNT}'\noutput_mode = 'all'", "managed.per_second.output_mode", "append, update"),
    ("unknown state store", "[spark]\nstate_store = 'memory'", "spark.state_store", "one of hdfs, rocksdb"),
    ("unknown source stream", SPARK + f"builder = '{COUNT}'\nstreams = ['views']", "managed.per_second.streams", "plan stream names (clicks)"),
    ("unknown migration", "[spark]\nmigration = 'magic'", "spark.migration", "one of naive-restart, genmig"),
    ("socket source under GenMig", SPARK + f"builder = '{COUNT}'\nsources = {{ clicks = {{ format = 'socket', port = 9 }} }}",
     "managed.per_second.sources.clicks", "cannot migrate a 'socket' source: not replayable"),
    ("rate source under GenMig", SPARK + f"builder = '{COUNT}'\n[managed.per_second.sources.clicks]\nformat = 'rate'",
     "managed.per_second.sources.clicks", "use rate-micro-batch"),
    ("undeclared user source", SPARK + f"builder = '{COUNT}'\n[managed.per_second.sources.clicks]\nformat = 'ticks'\n"
     "data_source = 'support.user_source:Undeclared'", "managed.per_second.sources.clicks", "does not declare the GenMig contract"),
    ("file source without event time", SPARK + f"builder = '{COUNT}'\n[managed.per_second.sources.clicks]\nformat = 'json'\n"
     "path = '/data'", "managed.per_second.sources.clicks", "event_time_column"),
    ("source of another stream", SPARK + f"builder = '{COUNT}'\n[managed.per_second.sources.views]\nformat = 'json'",
     "managed.per_second.sources.views", "its streams: clicks"),
    (
        "steps not ascending",
        "[source.streams.clicks]\nsteps = [ { at_seconds = 5, rate_per_second = 1 }, { at_seconds = 2, rate_per_second = 1 } ]",
        "source.streams.clicks.steps[1].at_seconds",
        "ascending order",
    ),
    (
        "burst factor 0",
        "[source.streams.clicks]\nbursts = [ { at_seconds = 5, duration_seconds = 1, factor = 0 } ]",
        "source.streams.clicks.bursts[0].factor",
        "expected a number > 0",
    ),
    ("bad alert kind", "[[alerts]]\nkind = 'email'", "alerts[0].kind", "one of webhook, alertmanager, command, log"),
    ("webhook without url", "[[alerts]]\nkind = 'webhook'", "alerts[0].url", "http:// or https:// URL"),
    (
        "command with empty argv",
        "[[alerts]]\nkind = 'log'\n[[alerts]]\nkind = 'command'\nargv = []",
        "alerts[1].argv",
        "a non-empty list",
    ),
    (
        "key of another hook kind",
        "[[alerts]]\nkind = 'log'\nurl = 'https://x'",
        "alerts[0].url",
        "allowed keys of a log hook: kind",
    ),
    ("alerts as a table", "[alerts]\nkind = 'log'", "alerts", "[[alerts]]"),
    ("negative dedup window", "[alerting]\ndedup_seconds = -1", "alerting.dedup_seconds", "expected a number ≥ 0"),
    ("empty alert queue", "[alerting]\nqueue_size = 0", "alerting.queue_size", "expected a whole number ≥ 1"),
    ("stale after 0.5 intervals", "[alerting]\nstale_intervals = 0.5", "alerting.stale_intervals", "whole number ≥ 1"),
    ("estimate factor 1", "[alerting]\nestimate_factor = 1", "alerting.estimate_factor", "expected a number > 1"),
    ("unknown alerting key", "[alerting]\nwindow = 3", "alerting.window", "allowed keys of [alerting]: dedup_seconds"),
    ("metrics on no address", "[metrics]\naddress = 'not an address!'", "metrics.address", "expected an IP address to listen on"),
    ("metrics port too high", "[metrics]\nport = 70000", "metrics.port", "in [0, 65535]"),
    ("metrics enabled not a boolean", "[metrics]\nenabled = 'yes'", "metrics.enabled", "true or false"),
    (
        "plan file and inline plan",
        ("[plan.streams.clicks]", "[plan]\nfile = 'plans/x.json'\n[plan.streams.clicks]"),
        "plan",
        "exactly one of file",
    ),
    ("invalid plan", ("w = 10000", "w = -3"), "plan", "w must be > 0"),
    ("unknown profile", "[model]\nprofile = 'pipes'", "model.profile", "one of paper"),
    ("store call timeout 0", "[store]\ncall_timeout_seconds = 0", "store.call_timeout_seconds", "expected a number > 0 and ≤ 3600 (an hour), got 0"),
    ("store lease negative", "[store]\nlease_seconds = -5", "store.lease_seconds", "expected a number > 0 and ≤ 86400 (a day), got -5"),
    (
        "apply retries shrink",
        "[apply]\nretry_initial_seconds = 10\nretry_max_seconds = 5",
        "apply.retry_max_seconds",
        "5 is less than retry_initial_seconds (10); allowed: ≥ retry_initial_seconds",
    ),
    ("apply without attempts", "[apply]\nmax_attempts = 0", "apply.max_attempts", "expected a whole number > 0 and ≤ 1e+06, got 0"),
    ("unknown apply key", "[apply]\nretries = 3", "apply.retries", "allowed keys of [apply]: retry_initial_seconds"),
    (
        "spark conf not scalar",
        "[spark.conf]\n'spark.jars' = [1, 2]",
        'spark.conf."spark.jars"',
        "a string, number or boolean",
    ),
    ("app without a command", "[[apps]]\nname = 'demo'", "apps[0].command", "missing; expected a non-empty list of strings"),
    ("app command as one string", "[[apps]]\nname = 'demo'\ncommand = 'python app.py'", "apps[0].command",
     "expected a non-empty list of non-empty strings"),
    ("app program not found", "[[apps]]\nname = 'demo'\ncommand = ['armd-no-such-program']", "apps[0].command",
     "program 'armd-no-such-program' not found"),
    ("app cwd not a folder", "[[apps]]\nname = 'demo'\ncommand = ['python']\ncwd = 'no-such-folder'", "apps[0].cwd",
     "is not a folder"),
    ("app name twice", "[[apps]]\nname = 'demo'\ncommand = ['python']\n[[apps]]\nname = 'demo'\ncommand = ['python']",
     "apps[1].name", "a name unique among [[apps]]"),
    ("app name with a space", "[[apps]]\nname = 'my demo'\ncommand = ['python']", "apps[0].name", "letters, digits"),
    ("app env not a string", "[[apps]]\nname = 'demo'\ncommand = ['python']\nenv = { N = 1 }", "apps[0].env.N",
     "expected a string"),
]

# Accepted once and broken later (issue 17): every number has a finite upper bound, every name fits the store.
HUGE = "1e308"
LIMITS = [
    ("observe every 1e308 s", f"[schedule]\nobserve_seconds = {HUGE}", "schedule.observe_seconds", "in [0.01, 86400]"),
    ("decide every 1e308 s", f"[schedule]\ndecide_seconds = {HUGE}", "schedule.decide_seconds", "in [0.01, 3.1536e+07]"),
    ("apply every 1e-300 s", "[schedule]\napply_seconds = 1e-300", "schedule.apply_seconds", "in [0.01, 86400]"),
    ("housekeeping every 1e308 s", f"[schedule]\nhousekeeping_seconds = {HUGE}", "schedule.housekeeping_seconds",
     "(10 ms to a year)"),
    ("retention 1e308 days", f"[store]\nretention_days = {HUGE}", "store.retention_days", "≤ 3650 (ten years), got 1e+308"),
    ("connect backoff 1e308 s", f"[store]\nconnect_backoff_seconds = {HUGE}", "store.connect_backoff_seconds",
     "≤ 60 (a minute)"),
    ("connect retries 1000", "[store]\nconnect_retries = 1000", "store.connect_retries", "≥ 0 and ≤ 10, got 1000"),
    ("hook timeout 1e308 s", f"[[alerts]]\nkind = 'command'\nargv = ['true']\ntimeout_seconds = {HUGE}",
     "alerts[0].timeout_seconds", "≤ 3600 (an hour)"),
    ("hook retries huge", "[[alerts]]\nkind = 'command'\nargv = ['true']\nretries = 99999999999",
     "alerts[0].retries", "≤ 100"),
    ("negative seed", "[source]\nseed = -1", "source.seed", "a whole number ≥ 0 and ≤ 4.29497e+09, got -1"),
    ("seed past 32 bits", "[source]\nseed = 4294967296", "source.seed", "≤ 4.29497e+09"),
    ("rate 1e308", f"[source.streams.clicks]\nrate_per_second = {HUGE}", "source.streams.clicks.rate_per_second",
     "≤ 100000"),
    ("step rate 1e308", f"[source.streams.clicks]\nsteps = [{{ at_seconds = 1, rate_per_second = {HUGE} }}]",
     "source.streams.clicks.steps[0].rate_per_second", "≤ 100000"),
    ("burst factor 1e308", f"[source.streams.clicks]\nbursts = [{{ at_seconds = 1, duration_seconds = 1, factor = {HUGE} }}]",
     "source.streams.clicks.bursts[0].factor", "> 0 and ≤ 1000"),
    ("burst past the simulated rate", "[source.streams.clicks]\nrate_per_second = 1000\n"
     "bursts = [{ at_seconds = 1, duration_seconds = 1, factor = 200 }]", "source.streams.clicks.bursts[0].factor",
     "200 × the base rate 1000 is 200000 arrivals per second; allowed: at most 100000"),
    ("plan rate too fast to simulate", ("rate = 0.05", "rate = 1000"), "source.streams.clicks.rate_per_second",
     "the plan's rate 1e+06 arrivals per second is too fast to simulate"),
    ("burst 1e308 s long", f"[source.streams.clicks]\nbursts = [{{ at_seconds = 1, duration_seconds = {HUGE}, factor = 2 }}]",
     "source.streams.clicks.bursts[0].duration_seconds", "(a year)"),
    ("keys huge", "[source.streams.clicks]\nkeys = 99999999999", "source.streams.clicks.keys", "≤ 1e+06"),
    ("window up to 1e308", f"[queries.per_second]\nwindow = [1000, {HUGE}]", "queries.per_second.window",
     "each > 0 and ≤ 1e+12"),
    ("node window up to 1e308", f"[queries.per_second.windows]\nclicks_10s = [1000, {HUGE}]",
     "queries.per_second.windows.clicks_10s", "each > 0 and ≤ 1e+12"),
    ("weight 1e308", f"[queries.per_second]\nweight = {HUGE}", "queries.per_second.weight", "≤ 1e+06"),
    ("memory 1e308", ("memory_bytes = 1e6", f"memory_bytes = {HUGE}"), "bounds.memory_bytes", "(1 EiB)"),
    ("cpu 1e308", ("cpu = 100", f"cpu = {HUGE}"), "bounds.cpu", "≤ 1e+15"),
    ("cooldown 1e308 s", f"[guardrails]\ncooldown_seconds = {HUGE}", "guardrails.cooldown_seconds", "(a year)"),
    ("threshold 1e308", f"[triggers]\nthreshold = {HUGE}", "triggers.threshold", "≤ 1000"),
    ("dedup 1e308 s", f"[alerting]\ndedup_seconds = {HUGE}", "alerting.dedup_seconds", "(a year)"),
    ("queue 1e12", "[alerting]\nqueue_size = 1000000000000", "alerting.queue_size", "≤ 1e+06"),
    ("stale intervals 1e12", "[alerting]\nstale_intervals = 1000000000000", "alerting.stale_intervals", "≤ 1e+06"),
    ("estimate factor 1e308", f"[alerting]\nestimate_factor = {HUGE}", "alerting.estimate_factor", "> 1 and ≤ 1e+06"),
    ("apply retry 1e308 s", f"[apply]\nretry_max_seconds = {HUGE}", "apply.retry_max_seconds", "(a day)"),
    ("time unit 1e-300 s", "[model]\ntime_unit_seconds = 1e-300", "model.time_unit_seconds", "in [1e-09, 86400]"),
    ("plan d 1e-300", ("rate = 0.05", "d = 1e-300"), "plan", "d must be > 0 and at least 1e-06, got 1e-300"),
    ("plan rate 1e9", ("rate = 0.05", "rate = 1e9"), "plan", "1 / rate must be > 0 and at least 1e-06"),
    ("query name too long", ("[plan.queries.per_second]", "[plan.queries." + "q" * 201 + "]"), "plan",
     "a name must be a non-empty string of at most 200 characters"),
    ("stream name too long", ("[plan.streams.clicks]", "[plan.streams." + "s" * 201 + "]"), "plan",
     "at most 200 characters"),
    ("node id too long", ('id = "clicks_10s"', 'id = "' + "n" * 201 + '"'), "plan", "node id"),
]
MISTAKES += LIMITS
