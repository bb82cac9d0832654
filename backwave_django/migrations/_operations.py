"""Migration operations shared by backwave_django's migrations.

Index changes on the job tables are built (and dropped) with ``CONCURRENTLY`` on PostgreSQL, so
workers keep claiming and reporting while a large table is indexed; a migration using them sets
``atomic = False``. Elsewhere they are the plain operations.
"""

from django.db import migrations


class AddIndexWithoutBlocking(migrations.AddIndex):
    """``AddIndex``, built with ``CREATE INDEX CONCURRENTLY`` on PostgreSQL."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            if schema_editor.connection.vendor == "postgresql":
                schema_editor.add_index(model, self.index, concurrently=True)
            else:
                schema_editor.add_index(model, self.index)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        model = from_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            concurrently = schema_editor.connection.vendor == "postgresql"
            schema_editor.remove_index(model, self.index, **({"concurrently": True} if concurrently else {}))


class RemoveIndexWithoutBlocking(migrations.RemoveIndex):
    """``RemoveIndex``, dropped with ``DROP INDEX CONCURRENTLY`` on PostgreSQL."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = from_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            index = from_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
            if schema_editor.connection.vendor == "postgresql":
                schema_editor.remove_index(model, index, concurrently=True)
            else:
                schema_editor.remove_index(model, index)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            index = to_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
            concurrently = schema_editor.connection.vendor == "postgresql"
            schema_editor.add_index(model, index, **({"concurrently": True} if concurrently else {}))


class AlterFieldOutsideSQLite(migrations.AlterField):
    """``AlterField`` whose database change is skipped on SQLite, where Django makes any change to
    a column by copying the whole table into a new one: slow on a large log, and the copy would
    lose the indexes made with SQL in other migrations. The model state changes everywhere."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "sqlite":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "sqlite":
            super().database_backwards(app_label, schema_editor, from_state, to_state)
