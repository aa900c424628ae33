"""The text of the report's runtime sections, which the check's text view and `graphlint
runtime` both print: the phase verdicts (`runtime_text`), the torch.compile part
(`compile_text`) and the cross-check of the two halves (`crosscheck_text`)."""
