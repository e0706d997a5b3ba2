-- Job $1 under lease token $2 failed for good with error $3: `dead`, keeping its payload and
-- error history. Returns its kind and payload for whoever settles it.
update jobs
set status = 'dead',
    lease_token = null,
    lease_until = null,
    last_error = $3,
    errors = jobs_push_error(errors, attempts, $3),
    finished_at = now(),
    updated_at = now()
where id = $1
  and status = 'running'
  and lease_token = $2
returning kind, payload
