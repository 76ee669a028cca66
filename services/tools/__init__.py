"""Commands that are not processes (`pyngress render`, `pyngress status`): the one layer allowed to import
the process packages, to show what they would do or are doing."""
