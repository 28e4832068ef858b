package avfs.custom

x := 1
