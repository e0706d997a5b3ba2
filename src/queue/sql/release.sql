-- Hands the jobs of the leases ($1 ids, $2 their tokens, side by side) back to `ready`, due at
-- $3 (null: now), giving their attempt back; returns those it matched.
update jobs
set status = 'ready',
    attempts = greatest(attempts - 1, 0),
    run_at = coalesce($3::timestamptz, now()),
    lease_token = null,
    lease_until = null,
    updated_at = now()
from unnest($1::bigint[], $2::uuid[]) as held(id, token)
where jobs.id = held.id
  and jobs.status = 'running'
  and jobs.lease_token = held.token
returning jobs.id as "id: JobId"
