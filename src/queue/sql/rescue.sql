-- Up to $1 running jobs whose lease expired before $2 (null: the database's clock) go back to
-- `ready`, or to `dead` when that was their last attempt. A compare-and-set: rows are locked
-- with `skip locked` (a worker completing one right now keeps it) and matched again on the lease
-- token and expiry that were seen, so a completion that lands first always wins.
with expired as (
    select id, lease_token, lease_until
    from jobs
    where status = 'running'
      and lease_until < coalesce($2::timestamptz, clock_timestamp())
    order by lease_until
    limit $1
    for update skip locked
)
update jobs
set status = case when jobs.attempts >= jobs.max_attempts then 'dead' else 'ready' end,
    run_at = coalesce($2::timestamptz, now()),
    lease_token = null,
    lease_until = null,
    last_error = 'the lease expired: the worker stopped or lost its connection',
    errors = jobs_push_error(jobs.errors, jobs.attempts,
        'the lease expired: the worker stopped or lost its connection'),
    finished_at = case when jobs.attempts >= jobs.max_attempts then now() end,
    updated_at = now()
from expired
where jobs.id = expired.id
  and jobs.status = 'running'
  and jobs.lease_token = expired.lease_token
  and jobs.lease_until = expired.lease_until
returning jobs.id as "id: JobId", jobs.status as "status: JobStatus", jobs.kind, jobs.payload,
    jobs.last_error as "last_error!"
