-- Webhooks (issue 25): endpoints that other systems register, the deliveries made to them
-- (each one a `webhook.deliver` job of the queue), and the upload requests whose settling is an
-- event of its own.

-- One row per `POST /api/documents` request. `closed_at` is set once the request has stored
-- all its files (before that, more documents may still join it); `settled_at` once every
-- document it created became ready or failed, which is when `upload.settled` is sent, once.
create table uploads (
    id bigint generated always as identity primary key,
    created_at timestamptz not null default now(),
    closed_at timestamptz,
    settled_at timestamptz
);

alter table documents
    add column upload_id bigint
        constraint documents_upload_id_fkey references uploads (id) on delete set null;
create index documents_upload_id_idx on documents (upload_id) where upload_id is not null;

create table webhook_endpoints (
    id bigint generated always as identity primary key,
    url text not null,
    events text[] not null
        constraint webhook_endpoints_events_nonempty check (cardinality(events) > 0),
    -- Deliveries only for this collection's documents; null: every document. An endpoint of a
    -- deleted collection goes with it.
    collection_id bigint
        constraint webhook_endpoints_collection_fkey references collections (id) on delete cascade,
    -- `whsec_<base64>`: the Standard Webhooks form; shown once, at registration.
    secret text not null,
    created_at timestamptz not null default now()
);

create table webhook_deliveries (
    -- Sent as `webhook-id`, the same on every attempt.
    id uuid primary key,
    endpoint_id bigint not null
        constraint webhook_deliveries_endpoint_id_fkey references webhook_endpoints (id) on delete cascade,
    event_type text not null,
    payload jsonb not null,
    status text not null default 'pending'
        constraint webhook_deliveries_status_check check (status in ('pending', 'delivered', 'dead')),
    attempts integer not null default 0,
    last_error text,
    -- The queue job delivering it now (a retry from the page enqueues a new one).
    job_id bigint,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    delivered_at timestamptz
);
create index webhook_deliveries_endpoint_recent_idx on webhook_deliveries (endpoint_id, created_at desc);
create trigger webhook_deliveries_updated_at before update on webhook_deliveries
    for each row execute function set_updated_at();
