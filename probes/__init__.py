"""The probe catalog: data only (options, pairs, prompts, languages). See README.md."""
