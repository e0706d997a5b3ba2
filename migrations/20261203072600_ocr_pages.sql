-- Which pages OCR read (issue 26): the document view marks them, so a person can tell the text
-- tesseract produced from a text layer's. Written by the extract step's checkpoint with the
-- rest of what the extraction found; null for documents extracted before this column (the
-- view then says it does not know) and empty when no page was read by OCR.
alter table documents add column ocr_pages integer[];
