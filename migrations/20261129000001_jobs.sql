-- The job queue. Every piece of background work is a row here; workers claim rows with
-- `for update skip locked`, hold them under a lease (token + expiry), and every later write is
-- fenced by that token, so a worker that lost its lease can never overwrite a newer outcome.

create table jobs (
    id bigint generated always as identity,
    kind text not null,
    -- References only (ids, options), never document bytes: payloads stay small.
    payload jsonb not null default '{}'::jsonb,
    status text not null default 'ready',
    run_at timestamptz not null default now(),
    attempts integer not null default 0,
    max_attempts integer not null default 10,
    -- A fresh token per claim; null whenever the job is not running.
    lease_token uuid,
    lease_until timestamptz,
    -- Which worker holds the lease, for people reading the jobs list.
    leased_by text,
    idempotency_key text,
    last_error text,
    -- The most recent failures, oldest first, bounded by the queue (see queue::ERROR_HISTORY).
    errors jsonb not null default '[]'::jsonb,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    finished_at timestamptz,

    constraint jobs_pkey primary key (id),
    constraint jobs_idempotency_key_key unique (idempotency_key),
    constraint jobs_status_check
        check (status in ('ready', 'running', 'done', 'dead', 'cancelled')),
    constraint jobs_kind_check check (kind <> '' and length(kind) <= 100),
    constraint jobs_attempts_check check (attempts >= 0 and max_attempts >= 1),
    constraint jobs_lease_check
        check ((status = 'running') = (lease_token is not null and lease_until is not null))
);

-- The claim path: due ready jobs of one kind, oldest first. Partial, so it holds only the
-- ready rows however many finished jobs the table keeps.
create index jobs_ready_idx on jobs (kind, run_at, id) where status = 'ready';

-- The rescuer's path: running jobs whose lease expired.
create index jobs_running_lease_idx on jobs (lease_until) where status = 'running';

-- Retention's path: finished jobs by age, pruned in small batches.
create index jobs_done_finished_idx on jobs (finished_at) where status = 'done';

-- People look at failures: dead and cancelled jobs, newest first.
create index jobs_failed_idx on jobs (id) where status in ('dead', 'cancelled');

-- Each claim and completion leaves a dead tuple and dead index entries at the head of
-- jobs_ready_idx; with the default thresholds (20% of the table) a busy queue reads more and more
-- dead entries per claim before autovacuum runs. Vacuum this table early and without throttling.
alter table jobs set (
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0.0,
    autovacuum_vacuum_insert_threshold = 20000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);

-- Appends one failure to a job's error history, keeping the newest 20, so a job that fails
-- for days cannot grow its row without bound.
create function jobs_push_error(errors jsonb, attempt integer, message text)
returns jsonb
language sql
stable
as $$
    select jsonb_path_query_array(
        errors || jsonb_build_array(
            jsonb_build_object('attempt', attempt, 'at', now(), 'error', message)),
        '$[last - 19 to last]')
$$;
