-- A job kind is declared once, in Rust (issue 20): what a job's end means for its document is
-- the kind's own hook, run by the queue in the transaction that kills or cancels the job. The
-- triggers that named job kinds go, with their functions; the documents notify triggers, which
-- name no kinds, stay.
drop trigger jobs_settle_document on jobs;
drop trigger jobs_settle_ocr_document on jobs;
drop function docket_settle_document();
drop function docket_settle_ocr_document();
drop function docket_settle_failed_step(bigint, bigint, text, text, text);

