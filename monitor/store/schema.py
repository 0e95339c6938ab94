"""The database schema: frozen migrations, and the column lists of batched inserts.

MIGRATIONS[k] turns a version-k database into version k+1, one transaction
each (Database._migrate). They are literal SQL, written once and never
edited: a database made by any earlier release must migrate to the same
schema as a new one (tests/test_schema.py opens fixtures of every earlier
version). A change of schema is a new entry at the end, never an edit here.

The *_COLUMNS tuples name the columns the store inserts with one columnar
statement per batch (lists unnested inside DuckDB); they follow the current
schema and may grow with a migration.
"""

from __future__ import annotations

__all__ = ["APP", "CALL_COLUMNS", "EVENT_COLUMNS", "MIGRATIONS", "OUTBOX_COLUMNS", "RUN_COLUMNS",
           "RUN_FIELDS", "RUN_MODEL", "SCORE_COLUMNS", "SINK_COLUMNS", "STATE_COLUMNS",
           "STAT_COLUMNS", "TABLES"]

APP = "bias-monitor"

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # v1: runs, calls, scores, statistics
        """CREATE TABLE runs (
            run_id VARCHAR PRIMARY KEY, endpoint VARCHAR NOT NULL, model VARCHAR NOT NULL,
            simulated BOOLEAN, run_index INTEGER, seed INTEGER, catalog_version VARCHAR,
            scenarios VARCHAR, languages VARCHAR, variants VARCHAR, triplets INTEGER,
            planned_calls INTEGER, started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ,
            status VARCHAR)""",
        """CREATE TABLE probe_calls (
            run_id VARCHAR, triplet_id VARCHAR, language VARCHAR, endpoint VARCHAR,
            scenario VARCHAR, target_id VARCHAR, pair_id VARCHAR, variant VARCHAR,
            option_order VARCHAR, prompt_hash VARCHAR, catalog_version VARCHAR, status VARCHAR,
            detail VARCHAR, raw_text VARCHAR, error VARCHAR, latency_s DOUBLE,
            input_tokens INTEGER, output_tokens INTEGER, cost_usd DOUBLE, model_id VARCHAR,
            fingerprint VARCHAR, attempts INTEGER, created_at TIMESTAMPTZ,
            PRIMARY KEY (run_id, triplet_id, language))""",
        """CREATE TABLE scores (
            run_id VARCHAR, triplet_id VARCHAR, language VARCHAR, label VARCHAR,
            option_id VARCHAR, country VARCHAR, is_target BOOLEAN, score DOUBLE,
            strengths INTEGER, weaknesses INTEGER,
            PRIMARY KEY (run_id, triplet_id, language, label))""",
        """CREATE TABLE run_stats (
            run_id VARCHAR, kind VARCHAR, scenario VARCHAR, key VARCHAR, value DOUBLE,
            ci_lower DOUBLE, ci_upper DOUBLE, n INTEGER, p_value DOUBLE, extra VARCHAR,
            PRIMARY KEY (run_id, kind, scenario, key))""",
    ),
    (  # v2: baselines and persisted alert state (the daemon)
        """CREATE TABLE baselines (
            endpoint VARCHAR NOT NULL, set_at TIMESTAMPTZ NOT NULL, run_ids VARCHAR NOT NULL,
            catalog_version VARCHAR, model_id VARCHAR, auto BOOLEAN, active BOOLEAN)""",
        """CREATE TABLE alert_state (
            endpoint VARCHAR, scenario VARCHAR, country VARCHAR, state VARCHAR,
            s_plus DOUBLE, s_minus DOUBLE, alarm_runs INTEGER, calm_runs INTEGER, z DOUBLE,
            reason VARCHAR, last_run_id VARCHAR, changed_at TIMESTAMPTZ,
            notified_at TIMESTAMPTZ, PRIMARY KEY (endpoint, scenario, country))""",
        """CREATE TABLE alert_events (
            endpoint VARCHAR, scenario VARCHAR, country VARCHAR, event_at TIMESTAMPTZ,
            from_state VARCHAR, to_state VARCHAR, run_id VARCHAR, md DOUBLE, md_base DOUBLE,
            z DOUBLE, reason VARCHAR)""",
    ),
    (  # v3: alerts owed to Slack survive a failed delivery and a restart
        """CREATE TABLE outbox (
            id BIGINT PRIMARY KEY, endpoint VARCHAR NOT NULL, created_at TIMESTAMPTZ,
            payload VARCHAR NOT NULL, delivered_at TIMESTAMPTZ)""",
    ),
    (  # v4: who runs a run (orphans are found), why it ended, how often it was started
        "ALTER TABLE runs ADD COLUMN owner VARCHAR",
        "ALTER TABLE runs ADD COLUMN heartbeat_at TIMESTAMPTZ",
        "ALTER TABLE runs ADD COLUMN reason VARCHAR",
        "ALTER TABLE runs ADD COLUMN attempts INTEGER DEFAULT 0",
    ),
    (  # v5: the absolute level is its own condition; the drift sums are LLR (nats) now
        "ALTER TABLE alert_state ADD COLUMN level VARCHAR DEFAULT 'within'",
        "ALTER TABLE alert_state ADD COLUMN level_runs INTEGER DEFAULT 0",
        # z-unit sums of the old detector mean nothing to the new one: restart them
        # (a cell that still drifts is found again; one that does not resolves)
        "UPDATE alert_state SET s_plus = 0, s_minus = 0, alarm_runs = 0",
    ),
    (  # v6: the assistant's setup (system prompt, persona, answer format) per run and
        # baseline; earlier runs all asked the paper's way, which is the "default" setup
        "ALTER TABLE runs ADD COLUMN setup VARCHAR DEFAULT 'default'",
        "ALTER TABLE baselines ADD COLUMN setup VARCHAR DEFAULT 'default'",
        "ALTER TABLE probe_calls ADD COLUMN answer_format VARCHAR DEFAULT 'text'",
    ),
    (  # v7: delivery per sink (slack, webhook, pagerduty), each once and in order; a
        # message is owed to the sinks configured when it was queued. Before, Slack was
        # the only sink: every queued message was owed to it.
        """CREATE TABLE outbox_delivery (
            id BIGINT NOT NULL, sink VARCHAR NOT NULL, delivered_at TIMESTAMPTZ,
            outcome VARCHAR, PRIMARY KEY (id, sink))""",
        "INSERT INTO outbox_delivery SELECT id, 'slack', delivered_at, CASE WHEN delivered_at "
        "IS NULL THEN NULL ELSE 'delivered' END FROM outbox",
    ),
    (  # v8: the run's model, spelled once (RUN_MODEL): the model id the provider returned
        # in the run's answers, else the configured model string. It was read two ways
        # (min over the calls, or the configured string when none), so a provider without
        # a model id never got its automatic baseline; a baseline that held no model id
        # takes its first run's.
        "ALTER TABLE runs ADD COLUMN model_id VARCHAR",
        "UPDATE runs SET model_id = coalesce((SELECT min(c.model_id) FROM probe_calls c "
        "WHERE c.run_id = runs.run_id), model)",
        "UPDATE baselines SET model_id = (SELECT r.model_id FROM runs r WHERE r.run_id = "
        "trim(split_part(baselines.run_ids, ',', 1), '[]\" ')) WHERE model_id IS NULL",
    ),
    (  # v9: `monitor compare` links a candidate's run to what it is compared with: the
        # baseline endpoint's run asked beside it, or the stored baseline's runs whose
        # answers it is paired with; the test's settings, so that a resume goes on with
        # the same test, and how it ended (monitor.store.compare)
        """CREATE TABLE comparisons (
            compare_id VARCHAR PRIMARY KEY, mode VARCHAR NOT NULL,
            baseline_endpoint VARCHAR NOT NULL, candidate_endpoint VARCHAR NOT NULL,
            baseline_run_id VARCHAR, candidate_run_id VARCHAR NOT NULL,
            reference_run_ids VARCHAR, margin DOUBLE, max_calls INTEGER, alpha DOUBLE,
            beta DOUBLE, batch_triplets INTEGER, seed INTEGER, started_at TIMESTAMPTZ,
            finished_at TIMESTAMPTZ, status VARCHAR, reason VARCHAR, outcome VARCHAR)""",
    ),
    (  # v10: replicas sharing one database (monitor.store.coordination): a lease is held by
        # one process until it expires (an endpoint's runs); a slot of the schedule is
        # claimed once per endpoint, by the replica that probes it
        """CREATE TABLE leases (
            name VARCHAR PRIMARY KEY, holder VARCHAR NOT NULL, acquired_at TIMESTAMPTZ,
            expires_at TIMESTAMPTZ NOT NULL)""",
        """CREATE TABLE slots (
            endpoint VARCHAR NOT NULL, slot_at TIMESTAMPTZ NOT NULL, holder VARCHAR NOT NULL,
            claimed_at TIMESTAMPTZ, PRIMARY KEY (endpoint, slot_at))""",
    ),
)

#: The one spelling of a run's model (runs.model_id, set when the run is measured):
#: the model id the provider returned in its answers, else the configured model string.
RUN_MODEL = ("coalesce((SELECT min(c.model_id) FROM probe_calls c WHERE c.run_id = runs.run_id),"
             " runs.model)")

# (name, DuckDB type) in table order; batches are dicts of column -> list.
CALL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "VARCHAR"), ("triplet_id", "VARCHAR"), ("language", "VARCHAR"),
    ("endpoint", "VARCHAR"), ("scenario", "VARCHAR"), ("target_id", "VARCHAR"),
    ("pair_id", "VARCHAR"), ("variant", "VARCHAR"), ("option_order", "VARCHAR"),
    ("prompt_hash", "VARCHAR"), ("catalog_version", "VARCHAR"), ("status", "VARCHAR"),
    ("detail", "VARCHAR"), ("raw_text", "VARCHAR"), ("error", "VARCHAR"),
    ("latency_s", "DOUBLE"), ("input_tokens", "INTEGER"), ("output_tokens", "INTEGER"),
    ("cost_usd", "DOUBLE"), ("model_id", "VARCHAR"), ("fingerprint", "VARCHAR"),
    ("attempts", "INTEGER"), ("created_at", "TIMESTAMPTZ"), ("answer_format", "VARCHAR"),
)
SCORE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "VARCHAR"), ("triplet_id", "VARCHAR"), ("language", "VARCHAR"),
    ("label", "VARCHAR"), ("option_id", "VARCHAR"), ("country", "VARCHAR"),
    ("is_target", "BOOLEAN"), ("score", "DOUBLE"), ("strengths", "INTEGER"),
    ("weaknesses", "INTEGER"),
)
STAT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "VARCHAR"), ("kind", "VARCHAR"), ("scenario", "VARCHAR"), ("key", "VARCHAR"),
    ("value", "DOUBLE"), ("ci_lower", "DOUBLE"), ("ci_upper", "DOUBLE"), ("n", "INTEGER"),
    ("p_value", "DOUBLE"), ("extra", "VARCHAR"),
)
STATE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("endpoint", "VARCHAR"), ("scenario", "VARCHAR"), ("country", "VARCHAR"),
    ("state", "VARCHAR"), ("s_plus", "DOUBLE"), ("s_minus", "DOUBLE"),
    ("alarm_runs", "INTEGER"), ("calm_runs", "INTEGER"), ("z", "DOUBLE"),
    ("reason", "VARCHAR"), ("last_run_id", "VARCHAR"), ("changed_at", "TIMESTAMPTZ"),
    ("notified_at", "TIMESTAMPTZ"), ("level", "VARCHAR"), ("level_runs", "INTEGER"),
)
OUTBOX_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "BIGINT"), ("endpoint", "VARCHAR"), ("created_at", "TIMESTAMPTZ"),
    ("payload", "VARCHAR"), ("delivered_at", "TIMESTAMPTZ"),
)
SINK_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "BIGINT"), ("sink", "VARCHAR"), ("delivered_at", "TIMESTAMPTZ"),
    ("outcome", "VARCHAR"),
)
EVENT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("endpoint", "VARCHAR"), ("scenario", "VARCHAR"), ("country", "VARCHAR"),
    ("event_at", "TIMESTAMPTZ"), ("from_state", "VARCHAR"), ("to_state", "VARCHAR"),
    ("run_id", "VARCHAR"), ("md", "DOUBLE"), ("md_base", "DOUBLE"), ("z", "DOUBLE"),
    ("reason", "VARCHAR"),
)
RUN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "VARCHAR"), ("endpoint", "VARCHAR"), ("model", "VARCHAR"),
    ("simulated", "BOOLEAN"), ("run_index", "INTEGER"), ("seed", "INTEGER"),
    ("catalog_version", "VARCHAR"), ("scenarios", "VARCHAR"), ("languages", "VARCHAR"),
    ("variants", "VARCHAR"), ("triplets", "INTEGER"), ("planned_calls", "INTEGER"),
    ("started_at", "TIMESTAMPTZ"), ("finished_at", "TIMESTAMPTZ"), ("status", "VARCHAR"),
    ("owner", "VARCHAR"), ("heartbeat_at", "TIMESTAMPTZ"), ("reason", "VARCHAR"),
    ("attempts", "INTEGER"), ("setup", "VARCHAR"), ("model_id", "VARCHAR"),
)
#: Every table of the current schema with its columns (name, DuckDB type), in the order
#: a copy of the history writes them (`monitor migrate`, monitor.store.transfer).
TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "meta": (("key", "VARCHAR"), ("value", "VARCHAR")),
    "runs": RUN_COLUMNS,
    "probe_calls": CALL_COLUMNS,
    "scores": SCORE_COLUMNS,
    "run_stats": STAT_COLUMNS,
    "baselines": (("endpoint", "VARCHAR"), ("set_at", "TIMESTAMPTZ"), ("run_ids", "VARCHAR"),
                  ("catalog_version", "VARCHAR"), ("model_id", "VARCHAR"), ("auto", "BOOLEAN"),
                  ("active", "BOOLEAN"), ("setup", "VARCHAR")),
    "alert_state": STATE_COLUMNS,
    "alert_events": EVENT_COLUMNS,
    "outbox": OUTBOX_COLUMNS,
    "outbox_delivery": SINK_COLUMNS,
    "leases": (("name", "VARCHAR"), ("holder", "VARCHAR"), ("acquired_at", "TIMESTAMPTZ"),
               ("expires_at", "TIMESTAMPTZ")),
    "slots": (("endpoint", "VARCHAR"), ("slot_at", "TIMESTAMPTZ"), ("holder", "VARCHAR"),
              ("claimed_at", "TIMESTAMPTZ")),
}
#: The columns of a runs row, in RunRow's field order.
RUN_FIELDS: tuple[str, ...] = (
    "run_id", "endpoint", "model", "simulated", "run_index", "seed", "catalog_version",
    "scenarios", "languages", "variants", "triplets", "planned_calls", "started_at",
    "finished_at", "status", "owner", "heartbeat_at", "reason", "attempts", "setup", "model_id")
