"""The PostgreSQL schema: the same versions as the DuckDB file's (monitor.store.schema).

PG_MIGRATIONS[k] turns a version-k PostgreSQL database into version k+1, as
MIGRATIONS[k] does a DuckDB file: the same tables, columns and data changes,
spelled in PostgreSQL's types. Frozen like them: a change is a new entry at the
end of BOTH lists (tests/test_pg_store.py compares the two schemas).

What only PostgreSQL has, and why:
- text columns compare and sort bytewise (COLLATE "C"), as DuckDB's do, so an
  ORDER BY or a range of run ids means the same on both, whatever the server's
  locale;
- `list_contains(list, value)`, DuckDB's function, so that the store's SQL is one
  text for both engines;
- a sequence for the outbox's ids (replicas queue messages at once: max(id) + 1
  would collide) and indexes for the reads DuckDB answers from its zone maps.
"""

from __future__ import annotations

__all__ = ["PG_MIGRATIONS"]

_T = 'TEXT COLLATE "C"'
_D = "DOUBLE PRECISION"

PG_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # v1: runs, calls, scores, statistics
        "CREATE FUNCTION list_contains(anycompatiblearray, anycompatible) RETURNS boolean "
        "IMMUTABLE "
        "LANGUAGE sql AS 'SELECT $2 = ANY($1)'",
        f"""CREATE TABLE runs (
            run_id {_T} PRIMARY KEY, endpoint {_T} NOT NULL, model {_T} NOT NULL,
            simulated BOOLEAN, run_index INTEGER, seed INTEGER, catalog_version {_T},
            scenarios {_T}, languages {_T}, variants {_T}, triplets INTEGER,
            planned_calls INTEGER, started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ,
            status {_T})""",
        f"""CREATE TABLE probe_calls (
            run_id {_T}, triplet_id {_T}, language {_T}, endpoint {_T},
            scenario {_T}, target_id {_T}, pair_id {_T}, variant {_T},
            option_order {_T}, prompt_hash {_T}, catalog_version {_T}, status {_T},
            detail {_T}, raw_text {_T}, error {_T}, latency_s {_D},
            input_tokens INTEGER, output_tokens INTEGER, cost_usd {_D}, model_id {_T},
            fingerprint {_T}, attempts INTEGER, created_at TIMESTAMPTZ,
            PRIMARY KEY (run_id, triplet_id, language))""",
        f"""CREATE TABLE scores (
            run_id {_T}, triplet_id {_T}, language {_T}, label {_T},
            option_id {_T}, country {_T}, is_target BOOLEAN, score {_D},
            strengths INTEGER, weaknesses INTEGER,
            PRIMARY KEY (run_id, triplet_id, language, label))""",
        f"""CREATE TABLE run_stats (
            run_id {_T}, kind {_T}, scenario {_T}, key {_T}, value {_D},
            ci_lower {_D}, ci_upper {_D}, n INTEGER, p_value {_D}, extra {_T},
            PRIMARY KEY (run_id, kind, scenario, key))""",
        "CREATE INDEX runs_endpoint ON runs (endpoint, started_at)",
        "CREATE INDEX probe_calls_endpoint ON probe_calls (endpoint, created_at)",
    ),
    (  # v2: baselines and persisted alert state (the daemon)
        f"""CREATE TABLE baselines (
            endpoint {_T} NOT NULL, set_at TIMESTAMPTZ NOT NULL, run_ids {_T} NOT NULL,
            catalog_version {_T}, model_id {_T}, auto BOOLEAN, active BOOLEAN)""",
        f"""CREATE TABLE alert_state (
            endpoint {_T}, scenario {_T}, country {_T}, state {_T},
            s_plus {_D}, s_minus {_D}, alarm_runs INTEGER, calm_runs INTEGER, z {_D},
            reason {_T}, last_run_id {_T}, changed_at TIMESTAMPTZ,
            notified_at TIMESTAMPTZ, PRIMARY KEY (endpoint, scenario, country))""",
        f"""CREATE TABLE alert_events (
            endpoint {_T}, scenario {_T}, country {_T}, event_at TIMESTAMPTZ,
            from_state {_T}, to_state {_T}, run_id {_T}, md {_D}, md_base {_D},
            z {_D}, reason {_T})""",
        "CREATE INDEX alert_events_endpoint ON alert_events (endpoint, event_at)",
    ),
    (  # v3: alerts owed to Slack survive a failed delivery and a restart
        f"""CREATE TABLE outbox (
            id BIGINT PRIMARY KEY, endpoint {_T} NOT NULL, created_at TIMESTAMPTZ,
            payload {_T} NOT NULL, delivered_at TIMESTAMPTZ)""",
        "CREATE SEQUENCE outbox_ids",
        "CREATE INDEX outbox_endpoint ON outbox (endpoint, id)",
    ),
    (  # v4: who runs a run (orphans are found), why it ended, how often it was started
        f"ALTER TABLE runs ADD COLUMN owner {_T}",
        "ALTER TABLE runs ADD COLUMN heartbeat_at TIMESTAMPTZ",
        f"ALTER TABLE runs ADD COLUMN reason {_T}",
        "ALTER TABLE runs ADD COLUMN attempts INTEGER DEFAULT 0",
    ),
    (  # v5: the absolute level is its own condition; the drift sums are LLR (nats) now
        f"ALTER TABLE alert_state ADD COLUMN level {_T} DEFAULT 'within'",
        "ALTER TABLE alert_state ADD COLUMN level_runs INTEGER DEFAULT 0",
        "UPDATE alert_state SET s_plus = 0, s_minus = 0, alarm_runs = 0",
    ),
    (  # v6: the assistant's setup per run and baseline; the answer format per call
        f"ALTER TABLE runs ADD COLUMN setup {_T} DEFAULT 'default'",
        f"ALTER TABLE baselines ADD COLUMN setup {_T} DEFAULT 'default'",
        f"ALTER TABLE probe_calls ADD COLUMN answer_format {_T} DEFAULT 'text'",
    ),
    (  # v7: delivery per sink, each once and in order
        f"""CREATE TABLE outbox_delivery (
            id BIGINT NOT NULL, sink {_T} NOT NULL, delivered_at TIMESTAMPTZ,
            outcome {_T}, PRIMARY KEY (id, sink))""",
        "INSERT INTO outbox_delivery SELECT id, 'slack', delivered_at, CASE WHEN delivered_at "
        "IS NULL THEN NULL ELSE 'delivered' END FROM outbox",
    ),
    (  # v8: the run's model, spelled once (schema.RUN_MODEL)
        f"ALTER TABLE runs ADD COLUMN model_id {_T}",
        "UPDATE runs SET model_id = coalesce((SELECT min(c.model_id) FROM probe_calls c "
        "WHERE c.run_id = runs.run_id), model)",
        "UPDATE baselines SET model_id = (SELECT r.model_id FROM runs r WHERE r.run_id = "
        "btrim(split_part(baselines.run_ids, ',', 1), '[]\" ')) WHERE model_id IS NULL",
    ),
    (  # v9: `monitor compare`: the row linking a comparison's runs (monitor.store.compare)
        f"""CREATE TABLE comparisons (
            compare_id {_T} PRIMARY KEY, mode {_T} NOT NULL,
            baseline_endpoint {_T} NOT NULL, candidate_endpoint {_T} NOT NULL,
            baseline_run_id {_T}, candidate_run_id {_T} NOT NULL,
            reference_run_ids {_T}, margin {_D}, max_calls INTEGER, alpha {_D},
            beta {_D}, batch_triplets INTEGER, seed INTEGER, started_at TIMESTAMPTZ,
            finished_at TIMESTAMPTZ, status {_T}, reason {_T}, outcome {_T})""",
    ),
    (  # v10: replicas sharing one database: leases and claimed slots
        f"""CREATE TABLE leases (
            name {_T} PRIMARY KEY, holder {_T} NOT NULL, acquired_at TIMESTAMPTZ,
            expires_at TIMESTAMPTZ NOT NULL)""",
        f"""CREATE TABLE slots (
            endpoint {_T} NOT NULL, slot_at TIMESTAMPTZ NOT NULL, holder {_T} NOT NULL,
            claimed_at TIMESTAMPTZ, PRIMARY KEY (endpoint, slot_at))""",
    ),
)
