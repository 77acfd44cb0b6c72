"""placeholder"""
import click
@click.command("info")
def command() -> None:
    """placeholder"""
