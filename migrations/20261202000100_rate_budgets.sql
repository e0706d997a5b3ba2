-- One embedding rate budget for the whole fleet: every docket process that talks to the same
-- provider (base URL, model and API key, hashed into `key`) takes its requests and tokens from
-- this row, so the provider's per-minute limits hold however many processes run.
--
-- The budget is GCRA ("generic cell rate algorithm") kept as one theoretical arrival time per
-- dimension: a grant of n requests moves `request_tat` n emission intervals later (from now when
-- the budget has been idle). The granting process may send once `request_tat` minus the burst
-- allowance has passed. The intervals and the burst come from the caller's configuration
-- (DOCKET_RPM / DOCKET_TPM), so nothing here has to change when a limit changes.
--
-- `paused_until` is set from a provider's 429 (Retry-After or x-ratelimit-reset-*): no grant is
-- usable before it, in any process.
create table rate_budgets (
    -- A sha256 prefix of provider base URL, model and API key: never the key in clear.
    key text not null,
    request_tat timestamptz not null default clock_timestamp(),
    token_tat timestamptz not null default clock_timestamp(),
    paused_until timestamptz,
    updated_at timestamptz not null default clock_timestamp(),
    constraint rate_budgets_pkey primary key (key)
);
