-- Where a chunk sits, as a person names it: "slide 3", "Q1, rows 4–9", "2. Installation ›
-- 2.1 Requirements", "attachment report.pdf › page 2". Written by the extract step for
-- structured formats (DOCX, PPTX, XLSX, ODF, EPUB, HWPX); null for PDFs, images and plain
-- text, whose hits say "page N" from `page` (so chunks written before this column need no
-- rewrite). For structured formats `page` is the section's ordinal, kept so that a chunk still
-- never spans two sections.
alter table chunks add column location text;
