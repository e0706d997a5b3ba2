-- Extraction that OCR completes (issue 13).
--
-- progress: how far a long step got, for the page ({"step":"ocr","done":3,"total":10});
-- written after every OCR page, cleared by the step's checkpoint, null otherwise.
-- extract_note: why pages went to OCR (no text layer, garbage text), so a person can see why
-- a PDF that has text was read by OCR anyway.
alter table documents
    add column progress jsonb,
    add column extract_note text;

-- Progress is worth a live event (the landed trigger fires on status and error only), so the
-- page's OCR counter moves without polling. One message per page is far below NOTIFY's limits.
create trigger documents_notify_progress after update on documents
    for each row
    when (old.progress is distinct from new.progress)
    execute function docket_notify_document();

-- An OCR job that ends without speaking for its document (rescued past its last attempt,
-- cancelled) settles it as a failed extraction, as jobs_settle_document does for the extract
-- and embed kinds (OCR is a phase of extraction), and clears the progress it left.
create function docket_settle_ocr_document() returns trigger
language plpgsql
as $$
declare
    doc bigint := (new.payload ->> 'document_id')::bigint;
begin
    update documents set progress = null where id = doc and progress is not null;
    if new.status = 'cancelled' then
        perform docket_settle_failed_step(doc, new.id, 'extract', 'cancelled',
            'the ocr job was cancelled' || coalesce(': ' || new.last_error, ''));
    else
        perform docket_settle_failed_step(doc, new.id, 'extract', 'retries_exhausted',
            'gave up after the last attempt: ' || coalesce(new.last_error, 'no error was recorded'));
    end if;
    return null;
end
$$;

create trigger jobs_settle_ocr_document after update on jobs
    for each row
    when (old.status is distinct from new.status
          and new.status in ('dead', 'cancelled')
          and new.kind = 'ocr'
          and new.payload ? 'document_id')
    execute function docket_settle_ocr_document();
