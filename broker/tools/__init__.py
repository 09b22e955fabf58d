"""What a user runs: the ``trafka`` command (cli.py) and its subcommands (commands.py), the admin and
control clients they use, a local cluster of broker processes, and the finder and fetcher of an Apache
ZooKeeper installation."""
