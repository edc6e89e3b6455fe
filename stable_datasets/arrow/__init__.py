"""Low-level Arrow helpers shared by features, layouts and datasets: zero-copy cell readers
(`cells`) and ordered gathers across tables (`tables`)."""
