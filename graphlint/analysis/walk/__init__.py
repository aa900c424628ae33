"""One file's pass: the rule base and the context a rule sees (`rule`), the analysis that
parses the file and walks each function once with every rule (`file`), and the thread with a
large stack it runs on (`stack`)."""
