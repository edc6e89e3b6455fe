"""Low-level Arrow helpers shared by features, layouts and datasets: zero-copy cell readers
(`cells`), ordered gathers across tables (`tables`) and type predicates (`types`)."""
