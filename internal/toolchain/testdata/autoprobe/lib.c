int autoprobe_answer(void) { return 42; }
