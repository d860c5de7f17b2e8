// Service worker bootstrap (filled by the extension issue).
