-- Two things a person reads on the page (issue 26), one per table's owner.
--
-- jobs (queue): a person's retry starts a dead or cancelled job over with a fresh attempt
-- budget (`attempts` back to 0, `max_attempts` back to what it was enqueued with), so the
-- count reads "1 of 3" again and the backoff starts from its first step. The error history
-- stays; these say how often a person retried the job and when last, so the history can be
-- read as runs.
alter table jobs add column retries integer not null default 0;
alter table jobs add column retried_at timestamptz;

alter table jobs add constraint jobs_retries_check check (retries >= 0);

-- documents (documents, written by the pipeline's extract and OCR steps): one description of
-- how the document's text was obtained (`documents::ExtractionNote`: text layer, OCR on N of M
-- pages, OCR pending, OCR off), written with the state it describes. Null for documents
-- extracted before it was recorded, and for a document whose pending OCR failed.
alter table documents add column extraction jsonb;
