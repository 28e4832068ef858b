package extensions.nomanifest

reasons := set()
