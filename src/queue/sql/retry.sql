-- A failed attempt of job $1 under lease token $2, with error $4: due again $3 milliseconds
-- after $6 (null: now), or `dead` when $5 (the attempt counts) and it was the last one. With $5
-- false the attempt is given back and the error history left alone. Returns the new status,
-- and the kind and payload for whoever settles a job that died.
update jobs
set attempts = attempts - case when $5 then 0 else 1 end,
    status = case when $5 and attempts >= max_attempts then 'dead' else 'ready' end,
    run_at = coalesce($6::timestamptz, now()) + $3 * interval '1 millisecond',
    lease_token = null,
    lease_until = null,
    last_error = $4,
    errors = case when $5 then jobs_push_error(errors, attempts, $4) else errors end,
    finished_at = case when $5 and attempts >= max_attempts then now() end,
    updated_at = now()
where id = $1
  and status = 'running'
  and lease_token = $2
returning status as "status: JobStatus", kind, payload
