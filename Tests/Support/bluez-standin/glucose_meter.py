# -*- coding: utf-8 -*-
'''BlueZ stand-in with Bluetooth LE glucose meters (python-dbusmock template).

Built on dbusmock's bluez5 template (adapter, device, agent manager) and adds what it lacks: the GATT
tree of a Glucose Profile meter (Glucose 0x1808, Device Information 0x180A, optional Current Time
0x1805), a Record Access Control Point that answers like a meter, passkey pairing through the
registered org.bluez.Agent1, and fault behaviours. Object paths and error names follow real BlueZ.

Run with Debian's interpreter (it has dbus-python):
    /usr/bin/python3 -m dbusmock --system --template ./glucose_meter.py -p '<json>'

Template parameters (JSON, all optional):
    {"adapter": "hci0", "meters": [{"address": "C0:26:DA:01:02:03", "name": "Meter", "options": {...}}]}
Meters given here exist from the start (a restarted stand-in comes back with its "bonded" meters).

Control methods on org.bluez.Mock at / (besides bluez5's AddAdapter, AddDevice, ...):
    AddGlucoseMeter(s adapter, s address, s name, s options_json) -> o device_path
    RemoveGlucoseMeter(s address)                   device goes away (InterfacesRemoved)
    AddGlucoseRecords(s address, s records_json)    the meter took new readings
    DisconnectGlucoseMeter(s address)               meter-initiated disconnect
    SetGlucoseMeterInRange(s address, b in_range)   out of range: Connect fails, RSSI removed
    SetGlucoseMeterOptions(s address, s options_json)  merge options into the meter's options
    GetGlucoseMeterState(s address) -> s json       counters and flags for assertions
    GetAgentState() -> s json                       agent registrations: {"registrations": [[path, capability,
                                                    sender], ...], "default_agent": path or null}

Meter options (JSON object):
    records: [[measurement_hex, context_hex_or_null], ...]  stored records, oldest first
    context: true            expose 0x2A34 (false: no context characteristic, contexts never sent)
    manufacturer, model, serial, firmware: Device Information strings
    features: "0204"         0x2A51 value (hex)
    date_time: null          hex of 0x2A08 inside the Glucose service (Roche style); absent when null
    cts: null                hex of 0x2A2B in a Current Time service 0x1805; absent when null
    requires_pairing: false  Glucose characteristics fail with org.bluez.Error.NotPermitted "Not paired"
                             until Device1.Pair succeeded
    pin: "123456"            the passkey the agent must return from RequestPasskey
    enforce_cccd: true       RACP write before StartNotify on 0x2A52 fails with ATT error 0x81
    racp_att_error: null     every RACP write fails with this ATT error code (e.g. 129 = 0x81)
    racp_att_error_count: null  only the first N RACP writes fail with racp_att_error (null: all of them)
    busy_writes: 0           the first N RACP writes fail with ATT error 0x80 (procedure already in progress)
    disconnect_after_records: null  the meter drops the link after sending K records of a report
    record_interval_ms: 0    0: records are notified inside WriteValue, before its reply (as dbusmock does);
                             > 0: WriteValue replies first, records follow one per interval (abort works)
    keep_gatt_when_disconnected: false  keep the GATT objects while disconnected (bonded-device cache)
    bonded: false            the meter is bonded already (Paired), as bluetoothd restores it from its cache
    advertising: true        false: the device has no RSSI (known to bluetoothd, not advertising); it never
                             advertises by itself, only SetGlucoseMeterInRange brings an RSSI
    cts_writable: false      the Current Time characteristic (cts) also takes writes (the clock can be set)
    isens_time: false        an i-SENS vendor time service 0xFFF0 with its write characteristic 0xFFF1
    verio: null              a OneTouch Verio instead of a Glucose Profile meter (docs/verio-protocol.md): no
                             Glucose service but the Verio service af9df7a1-... with command (write) and reply
                             (notify); {"clock": seconds since 2000-01-01, "records": [[number, seconds, mg/dL,
                             trailer_hex or null], ...], "highest": newest record number}. Each command gets the
                             one-byte acknowledgement 81 and its framed reply; an unbonded host with
                             requires_pairing gets "not allowed" (07); a missing record "not supported" (08).
                             disconnect_after_records applies to record replies.
Writes to the clock characteristics are kept in the meter state as "clock_writes" (hex, in order).
'''

import binascii
import json
import time

import dbus
from gi.repository import GLib

from dbusmock import OBJECT_MANAGER_IFACE, mockobject
from dbusmock.templates import bluez5
from dbusmock.templates.bluez5 import *  # noqa: F401,F403  (registers bluez5's D-Bus methods)

BUS_NAME = 'org.bluez'
MAIN_OBJ = '/'
SYSTEM_BUS = True
IS_OBJECT_MANAGER = True

MOCK_IFACE = 'org.bluez.Mock'
DEVICE_IFACE = 'org.bluez.Device1'
SERVICE_IFACE = 'org.bluez.GattService1'
CHAR_IFACE = 'org.bluez.GattCharacteristic1'
AGENT_IFACE = 'org.bluez.Agent1'
AGENT_MANAGER_IFACE = 'org.bluez.AgentManager1'
ERR = 'org.bluez.Error.'

BASE_UUID = '-0000-1000-8000-00805f9b34fb'
GLUCOSE_SERVICE = 0x1808
VERIO_SERVICE = 'af9df7a1-e595-11e3-96b4-0002a5d5c51b'
VERIO_COMMAND = 'af9df7a2-e595-11e3-96b4-0002a5d5c51b'
VERIO_REPLY = 'af9df7a3-e595-11e3-96b4-0002a5d5c51b'

DEFAULT_OPTIONS = {
    'records': [],
    'context': True,
    'manufacturer': 'Sugard Test Meters',
    'model': 'GM-1',
    'serial': '0001',
    'firmware': '1.0',
    'features': '0204',
    'date_time': None,
    'cts': None,
    'requires_pairing': False,
    'pin': '123456',
    'enforce_cccd': True,
    'racp_att_error': None,
    'racp_att_error_count': None,
    'busy_writes': 0,
    'disconnect_after_records': None,
    'record_interval_ms': 0,
    'keep_gatt_when_disconnected': False,
}

# address -> Meter
METERS = {}


def uuid16(value):
    '''A 16-bit UUID's full form; 128-bit UUIDs (strings) pass through.'''
    return value if isinstance(value, str) else f'{value:08x}{BASE_UUID}'


def ukey(value):
    '''How a characteristic is named in the meter state: 2a52, or the full 128-bit UUID.'''
    return value if isinstance(value, str) else f'{value:04x}'


def att_error(code):
    '''The D-Bus error real bluetoothd (src/gatt-client.c create_gatt_dbus_error) returns for an ATT error.'''
    if code in (0x05, 0x0f, 0x0c):  # insufficient authentication / encryption / key size
        return dbus.exceptions.DBusException('Not paired', name=ERR + 'NotPermitted')
    return dbus.exceptions.DBusException(f'Operation failed with ATT error: 0x{code:02x}', name=ERR + 'Failed')


def ay(data):
    return dbus.Array([dbus.Byte(b) for b in data], signature='y')


class Meter:
    '''State of one simulated meter. Characteristic objects find it through their meter_address.'''

    def __init__(self, adapter, address, name, options):
        self.adapter = adapter
        self.address = address.upper()
        self.name = name
        self.options = dict(DEFAULT_OPTIONS)
        self.options.update(options)
        self.records = [self._record(r) for r in self.options['records']]
        self.path = f'/org/bluez/{adapter}/dev_' + self.address.replace(':', '_')
        self.paired = False
        self.connected = False
        self.in_range = True
        self.gatt_paths = []          # exported GATT object paths, in creation order
        self.char_paths = {}          # uuid16 -> characteristic path
        self.report_sent = 0          # records sent in the current report
        self.transfer = None          # pending asynchronous report (GLib source id), if any
        self.busy_left = int(self.options.get('busy_writes') or 0)
        self.att_errors_sent = 0      # RACP writes failed with racp_att_error so far
        self.counters = {'racp_writes': 0, 'records_sent': 0, 'pair_attempts': 0, 'passkeys': [],
                         'connects': 0, 'start_notify': {}, 'aborts': 0, 'clock_writes': [], 'verio_commands': []}

    @staticmethod
    def _record(pair):
        measurement = bytes.fromhex(pair[0])
        context = bytes.fromhex(pair[1]) if len(pair) > 1 and pair[1] else None
        return (measurement, context)

    @staticmethod
    def seq(record):
        return int.from_bytes(record[0][1:3], 'little')

    def state(self):
        return {
            'path': self.path, 'paired': self.paired, 'connected': self.connected, 'in_range': self.in_range,
            'records': len(self.records), 'gatt_paths': self.gatt_paths,
            'characteristics': {ukey(k): v for k, v in self.char_paths.items()},
            'transfer_in_progress': self.transfer is not None, **self.counters,
        }


def meter_of(obj):
    return METERS[obj.meter_address]


def root():
    return mockobject.objects['/']


def find_meter(address):
    meter = METERS.get(address.upper())
    if meter is None:
        raise dbus.exceptions.DBusException(f'No glucose meter with address {address}.',
                                            name=MOCK_IFACE + '.NoSuchDevice')
    return meter


def device_obj(meter):
    return mockobject.objects[meter.path]


def set_device_props(meter, props):
    device_obj(meter).UpdateProperties(DEVICE_IFACE, props)


def char_obj(meter, uuid):
    path = meter.char_paths.get(uuid)
    return mockobject.objects.get(path) if path else None


def notify(meter, uuid, data):
    '''Deliver a notification/indication the way BlueZ does: PropertiesChanged of Value, if enabled.'''
    obj = char_obj(meter, uuid)
    if obj is None or not meter.connected:
        return False
    props = obj.props[CHAR_IFACE]
    props['Value'] = ay(data)
    if not props.get('Notifying', False):
        return False
    obj.EmitSignal(dbus.PROPERTIES_IFACE, 'PropertiesChanged', 'sa{sv}as',
                   [CHAR_IFACE, {'Value': ay(data)}, dbus.Array([], signature='s')])
    return True


# ---------------------------------------------------------------------------------------------
# GATT objects

def add_gatt(meter):
    '''Export the GATT tree with BlueZ-like handles and emit InterfacesAdded for each object.'''
    if meter.gatt_paths:
        return
    opts = meter.options
    services = []
    if opts.get('verio') is not None:
        services.append((0x000c, VERIO_SERVICE, [(0x000d, VERIO_COMMAND, ['write'], b''),
                                                 (0x000f, VERIO_REPLY, ['notify'], b'')]))
    glucose = [(0x000d, 0x2A18, ['notify'], b''),
               ]
    if opts.get('context', True):
        glucose.append((0x0010, 0x2A34, ['notify'], b''))
    glucose.append((0x0013, 0x2A51, ['read'], bytes.fromhex(opts.get('features') or '0000')))
    glucose.append((0x0015, 0x2A52, ['write', 'indicate'], b''))
    if opts.get('date_time'):
        glucose.append((0x0018, 0x2A08, ['read'], bytes.fromhex(opts['date_time'])))
    if opts.get('verio') is None:
        services.append((0x000c, GLUCOSE_SERVICE, glucose))
    dis = [(0x001b, 0x2A29, ['read'], str(opts.get('manufacturer', '')).encode()),
           (0x001d, 0x2A24, ['read'], str(opts.get('model', '')).encode()),
           (0x001f, 0x2A25, ['read'], str(opts.get('serial', '')).encode()),
           (0x0021, 0x2A26, ['read'], str(opts.get('firmware', '')).encode())]
    services.append((0x001a, 0x180A, dis))
    if opts.get('cts'):
        flags = ['read', 'write', 'notify'] if opts.get('cts_writable') else ['read', 'notify']
        services.append((0x0023, 0x1805, [(0x0024, 0x2A2B, flags, bytes.fromhex(opts['cts']))]))
    if opts.get('isens_time'):
        services.append((0x0027, 0xFFF0, [(0x0028, 0xFFF1, ['write'], b'')]))

    for handle, uuid, chars in services:
        svc_path = f'{meter.path}/service{handle:04x}'
        svc_props = {
            'UUID': dbus.String(uuid16(uuid)),
            'Device': dbus.ObjectPath(meter.path),
            'Primary': dbus.Boolean(True),
            'Includes': dbus.Array([], signature='o'),
        }
        root().AddObject(svc_path, SERVICE_IFACE, svc_props, [])
        meter.gatt_paths.append(svc_path)
        interfaces_added(svc_path, SERVICE_IFACE, svc_props)
        for chandle, cuuid, flags, value in chars:
            path = f'{svc_path}/char{chandle:04x}'
            props = {
                'UUID': dbus.String(uuid16(cuuid)),
                'Service': dbus.ObjectPath(svc_path),
                'Value': ay(value),
                'Flags': dbus.Array(flags, signature='s'),
                'MTU': dbus.UInt16(247),
            }
            if 'notify' in flags or 'indicate' in flags:
                props['Notifying'] = dbus.Boolean(False)
            root().AddObject(path, CHAR_IFACE, props, [
                ('ReadValue', 'a{sv}', 'ay', char_read),
                ('WriteValue', 'aya{sv}', '', char_write),
                ('StartNotify', '', '', char_start_notify),
                ('StopNotify', '', '', char_stop_notify),
            ])
            obj = mockobject.objects[path]
            obj.meter_address = meter.address
            obj.gatt_uuid = cuuid
            obj.gatt_service = uuid
            meter.gatt_paths.append(path)
            meter.char_paths[cuuid] = path
            interfaces_added(path, CHAR_IFACE, props)


def interfaces_added(path, iface, props):
    root().EmitSignal(OBJECT_MANAGER_IFACE, 'InterfacesAdded', 'oa{sa{sv}}',
                      [dbus.ObjectPath(path), dbus.Dictionary({iface: dbus.Dictionary(props, signature='sv')},
                                                              signature='sa{sv}')])


def remove_gatt(meter):
    for path in reversed(meter.gatt_paths):
        iface = CHAR_IFACE if '/char' in path.rsplit('/', 1)[-1] else SERVICE_IFACE
        if path in mockobject.objects:
            root().RemoveObject(path)
        root().EmitSignal(OBJECT_MANAGER_IFACE, 'InterfacesRemoved', 'oas',
                          [dbus.ObjectPath(path), dbus.Array([iface], signature='s')])
    meter.gatt_paths = []
    meter.char_paths = {}


def require_access(meter, obj):
    if not meter.connected:
        raise dbus.exceptions.DBusException('Not connected', name=ERR + 'Failed')
    if obj.gatt_service == GLUCOSE_SERVICE and meter.options.get('requires_pairing') and not meter.paired:
        raise att_error(0x05)


def char_read(self, _options):
    meter = meter_of(self)
    require_access(meter, self)
    if 'read' not in self.props[CHAR_IFACE]['Flags']:
        raise dbus.exceptions.DBusException('Read not permitted', name=ERR + 'NotPermitted')
    return dbus.ByteArray(bytes(self.props[CHAR_IFACE]['Value']))


def char_start_notify(self):
    meter = meter_of(self)
    require_access(meter, self)
    flags = self.props[CHAR_IFACE]['Flags']
    if 'notify' not in flags and 'indicate' not in flags:
        raise dbus.exceptions.DBusException('Operation is not supported', name=ERR + 'NotSupported')
    key = ukey(self.gatt_uuid)
    if self.props[CHAR_IFACE]['Notifying']:
        # Like bluetoothd: the same client subscribing again is refused and the CCCD is not rewritten.
        raise dbus.exceptions.DBusException('Operation already in progress', name=ERR + 'InProgress')
    meter.counters['start_notify'][key] = meter.counters['start_notify'].get(key, 0) + 1
    self.UpdateProperties(CHAR_IFACE, {'Notifying': dbus.Boolean(True)})


def char_stop_notify(self):
    meter = meter_of(self)
    if not meter.connected:
        raise dbus.exceptions.DBusException('Not connected', name=ERR + 'Failed')
    if self.props[CHAR_IFACE].get('Notifying'):
        self.UpdateProperties(CHAR_IFACE, {'Notifying': dbus.Boolean(False)})


def char_write(self, value, options):
    meter = meter_of(self)
    require_access(meter, self)
    if 'write' not in self.props[CHAR_IFACE]['Flags']:
        raise dbus.exceptions.DBusException('Write not permitted', name=ERR + 'NotPermitted')
    if str(options.get('type', 'request')) == 'command':
        raise dbus.exceptions.DBusException('Operation is not supported', name=ERR + 'NotSupported')
    if self.gatt_uuid == 0x2A52:
        racp_write(meter, self, bytes(value))
    elif self.gatt_uuid == VERIO_COMMAND:
        verio_write(meter, bytes(value))
    else:
        if self.gatt_uuid in (0x2A2B, 0xFFF1):
            meter.counters['clock_writes'].append(bytes(value).hex())
        if self.gatt_uuid == 0x2A2B:
            meter.options['cts'] = bytes(value).hex()  # the clock keeps the time set (across reconnects)
        self.props[CHAR_IFACE]['Value'] = ay(bytes(value))


# ---------------------------------------------------------------------------------------------
# OneTouch Verio (docs/verio-protocol.md)

def verio_frame(body):
    '''01 | 02 L 00 03 body 03 crc: L counts STX through the CRC; CRC-16/CCITT-FALSE of STX..ETX, LE.'''
    packet = bytes([0x02, len(body) + 7, 0x00, 0x03]) + bytes(body) + bytes([0x03])
    crc = binascii.crc_hqx(packet, 0xFFFF)
    return bytes([0x01]) + packet + bytes([crc & 0xFF, crc >> 8])


def verio_unframe(packet):
    '''The body of a command packet, or None when the framing or the CRC is wrong.'''
    if len(packet) < 8 or packet[0] != 0x01 or packet[1] != 0x02 or packet[2] != len(packet) - 1:
        return None
    if packet[3:5] != bytes([0x00, 0x03]) or packet[-3] != 0x03:
        return None
    if binascii.crc_hqx(packet[1:-2], 0xFFFF) != int.from_bytes(packet[-2:], 'little'):
        return None
    return packet[5:-3]


def verio_write(meter, packet):
    if packet == b'\x81':
        return  # the host's acknowledgement of a data reply
    verio = meter.options['verio']
    body = verio_unframe(packet)
    meter.counters['verio_commands'].append(body.hex() if body is not None else 'bad:' + packet.hex())

    def reply(status, payload=b''):
        notify(meter, VERIO_REPLY, verio_frame(bytes([status]) + payload))

    if meter.options.get('requires_pairing') and not meter.paired:
        reply(0x07)
        return
    notify(meter, VERIO_REPLY, b'\x81')
    records = {int(r[0]): r for r in verio.get('records', [])}
    if body == bytes([0x20, 0x02]):
        reply(0x06, int(verio.get('clock', 0)).to_bytes(4, 'little'))
    elif body == bytes([0x27, 0x00]):
        highest = int(verio.get('highest', max(records) if records else 0))
        reply(0x06, highest.to_bytes(4, 'little'))
    elif body == bytes([0x0a, 0x02, 0x06]):
        reply(0x06, len(records).to_bytes(2, 'little'))
    elif body is not None and len(body) == 3 and body[0] == 0xb3:
        number = int.from_bytes(body[1:3], 'little')
        limit = meter.options.get('disconnect_after_records')
        if limit is not None and meter.report_sent >= int(limit):
            meter.options['disconnect_after_records'] = None
            drop_link(meter)
            return
        record = records.get(number)
        if record is None:
            reply(0x08)
            return
        trailer = bytes.fromhex(record[3]) if len(record) > 3 and record[3] else bytes(5)
        meter.report_sent += 1
        meter.counters['records_sent'] += 1
        reply(0x06, int(record[1]).to_bytes(4, 'little') + int(record[2]).to_bytes(2, 'little') + trailer)
    else:
        reply(0x09)


# ---------------------------------------------------------------------------------------------
# Record Access Control Point

def racp_write(meter, obj, request):
    opts = meter.options
    meter.counters['racp_writes'] += 1
    if opts.get('racp_att_error') is not None:
        limit = opts.get('racp_att_error_count')
        if limit is None or meter.att_errors_sent < int(limit):
            meter.att_errors_sent += 1
            raise att_error(int(opts['racp_att_error']))
    if meter.busy_left > 0:
        meter.busy_left -= 1
        raise att_error(0x80)
    if opts.get('enforce_cccd', True) and not obj.props[CHAR_IFACE].get('Notifying'):
        raise att_error(0x81)
    if len(request) < 2:
        raise dbus.exceptions.DBusException('Invalid Length', name=ERR + 'InvalidArguments')
    op, operator, operand = request[0], request[1], request[2:]
    if meter.transfer is not None and op != 0x03:
        raise att_error(0x80)

    def respond(data):
        notify(meter, 0x2A52, bytes(data))

    if op == 0x03:  # abort
        meter.counters['aborts'] += 1
        if meter.transfer is not None:
            GLib.source_remove(meter.transfer)
            meter.transfer = None
        respond([0x06, 0x00, 0x03, 0x01])
        return
    if op not in (0x01, 0x04):
        respond([0x06, 0x00, op, 0x02])  # op code not supported (delete included)
        return
    selected, code = select_records(meter.records, operator, operand)
    if code is not None:
        respond([0x06, 0x00, op, code])
        return
    if op == 0x04:
        respond([0x05, 0x00] + list(len(selected).to_bytes(2, 'little')))
        return
    if not selected:
        respond([0x06, 0x00, 0x01, 0x06])
        return
    meter.report_sent = 0
    interval = int(opts.get('record_interval_ms') or 0)
    if interval <= 0:
        for record in selected:
            if not send_record(meter, record):
                return
        respond([0x06, 0x00, 0x01, 0x01])
        return
    pending = list(selected)

    def step():
        if not meter.connected:
            meter.transfer = None
            return False
        if pending:
            if not send_record(meter, pending.pop(0)):
                meter.transfer = None
                return False
            return True
        meter.transfer = None
        respond([0x06, 0x00, 0x01, 0x01])
        return False

    meter.transfer = GLib.timeout_add(interval, step)


def select_records(records, operator, operand):
    '''(records, None) or ([], response code) for a RACP operator and operand.'''
    if operator == 0x01:
        return (list(records), None) if not operand else ([], 0x05)
    if operator in (0x05, 0x06):
        if operand:
            return [], 0x05
        if not records:
            return [], None
        return ([records[0]] if operator == 0x05 else [records[-1]]), None
    if operator in (0x02, 0x03, 0x04):
        if not operand or operand[0] != 0x01:
            return [], (0x09 if operand else 0x05)  # only sequence-number filters
        values = operand[1:]
        need = 4 if operator == 0x04 else 2
        if len(values) != need:
            return [], 0x05
        a = int.from_bytes(values[0:2], 'little')
        if operator == 0x02:
            return [r for r in records if Meter.seq(r) <= a], None
        if operator == 0x03:
            return [r for r in records if Meter.seq(r) >= a], None
        b = int.from_bytes(values[2:4], 'little')
        return [r for r in records if a <= Meter.seq(r) <= b], None
    if operator == 0x00:
        return [], 0x03
    return [], 0x04


def send_record(meter, record):
    '''Notify one record (measurement, then its context). False when the link went down.'''
    limit = meter.options.get('disconnect_after_records')
    if limit is not None and meter.report_sent >= int(limit):
        drop_link(meter)
        return False
    measurement, context = record
    notify(meter, 0x2A18, measurement)
    if context is not None and meter.options.get('context', True):
        notify(meter, 0x2A34, context)
    meter.counters['records_sent'] += 1
    meter.report_sent += 1
    if limit is not None and meter.report_sent >= int(limit):
        drop_link(meter)
        return False
    return True


# ---------------------------------------------------------------------------------------------
# Device1 behaviour

def drop_link(meter):
    if not meter.connected:
        return
    meter.connected = False
    if meter.transfer is not None:
        GLib.source_remove(meter.transfer)
        meter.transfer = None
    dev = device_obj(meter)
    dev.connected = False
    for uuid in list(meter.char_paths):
        obj = char_obj(meter, uuid)
        if obj is not None and obj.props[CHAR_IFACE].get('Notifying'):
            obj.props[CHAR_IFACE]['Notifying'] = dbus.Boolean(False)
    set_device_props(meter, {'ServicesResolved': dbus.Boolean(False)})
    set_device_props(meter, {'Connected': dbus.Boolean(False)})
    if not meter.options.get('keep_gatt_when_disconnected'):
        remove_gatt(meter)


def device_connect(self):
    meter = meter_of(self)
    if not meter.in_range:
        raise dbus.exceptions.DBusException('le-connection-abort-by-local', name=ERR + 'Failed')
    if meter.connected:
        return
    meter.counters['connects'] += 1
    meter.report_sent = 0  # a Verio's disconnect_after_records counts record replies per connection
    meter.connected = True
    self.connected = True
    set_device_props(meter, {'Connected': dbus.Boolean(True)})
    add_gatt(meter)
    set_device_props(meter, {'ServicesResolved': dbus.Boolean(True)})


def device_disconnect(self):
    meter = meter_of(self)
    if not meter.connected:
        raise dbus.exceptions.DBusException('Not Connected', name=ERR + 'NotConnected')
    drop_link(meter)


def device_pair(self):
    meter = meter_of(self)
    meter.counters['pair_attempts'] += 1
    if meter.paired:
        raise dbus.exceptions.DBusException('Already Exists', name=ERR + 'AlreadyExists')
    if not meter.in_range:
        raise dbus.exceptions.DBusException('Page Timeout', name=ERR + 'ConnectionAttemptFailed')
    if meter.options.get('requires_pairing'):
        manager = mockobject.objects['/org/bluez']
        agent = manager.default_agent
        sender = getattr(manager, 'agent_senders', {}).get(str(agent)) if agent else None
        if not agent or not sender:
            raise dbus.exceptions.DBusException('Authentication Failed', name=ERR + 'AuthenticationFailed')
        proxy = self.connection.get_object(sender, agent, introspect=False)
        try:
            passkey = int(proxy.RequestPasskey(dbus.ObjectPath(meter.path), dbus_interface=AGENT_IFACE,
                                               timeout=30))
        except dbus.exceptions.DBusException as e:
            name = e.get_dbus_name() or ''
            if name.endswith('.Canceled'):
                raise dbus.exceptions.DBusException('Authentication Canceled',
                                                    name=ERR + 'AuthenticationCanceled') from e
            raise dbus.exceptions.DBusException('Authentication Rejected',
                                                name=ERR + 'AuthenticationRejected') from e
        meter.counters['passkeys'].append(passkey)
        if passkey != int(meter.options.get('pin') or 0):
            raise dbus.exceptions.DBusException('Authentication Failed', name=ERR + 'AuthenticationFailed')
    meter.paired = True
    self.paired = True
    set_device_props(meter, {'Paired': dbus.Boolean(True)})
    if not meter.connected:  # like bluetoothd, pairing leaves the LE link up
        device_connect(self)


def create_meter(adapter, address, name, options):
    meter = Meter(adapter, address, name, options)
    if meter.address in METERS:
        raise dbus.exceptions.DBusException(f'Meter {address} already exists.', name=MOCK_IFACE + '.AlreadyExists')
    path = bluez5.AddDevice(root(), adapter, meter.address, name)
    METERS[meter.address] = meter
    dev = mockobject.objects[path]
    dev.meter_address = meter.address
    for method, code in (('Connect', device_connect), ('Disconnect', device_disconnect), ('Pair', device_pair)):
        in_sig, out_sig, _, wrapper = dev.methods[DEVICE_IFACE][method]
        dev.methods[DEVICE_IFACE][method] = (in_sig, out_sig, code, wrapper)
    main = VERIO_SERVICE if meter.options.get('verio') is not None else uuid16(0x1808)
    uuids = [main, uuid16(0x180A)] + ([uuid16(0x1805)] if meter.options.get('cts') else [])
    set_device_props(meter, {'UUIDs': dbus.Array(uuids, signature='s')})
    if meter.options.get('bonded'):
        meter.paired = True
        dev.paired = True
        set_device_props(meter, {'Paired': dbus.Boolean(True)})
    if meter.options.get('advertising') is False:
        dev.props[DEVICE_IFACE].pop('RSSI', None)
        dev.EmitSignal('org.freedesktop.DBus.Properties', 'PropertiesChanged', 'sa{sv}as',
                       [DEVICE_IFACE, dbus.Dictionary({}, signature='sv'), dbus.Array(['RSSI'], signature='s')])
    if meter.options.get('keep_gatt_when_disconnected'):
        add_gatt(meter)
    return meter


# ---------------------------------------------------------------------------------------------
# org.bluez.Mock control methods

@dbus.service.method(MOCK_IFACE, in_signature='ssss', out_signature='o')
def AddGlucoseMeter(self, adapter, address, name, options_json):
    '''Add a glucose meter device; see the module documentation for the options.'''
    options = json.loads(options_json) if options_json else {}
    return dbus.ObjectPath(create_meter(adapter, address, name, options).path)


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='')
def RemoveGlucoseMeter(self, address):
    '''The device object goes away (like Adapter1.RemoveDevice, or an unbonded device timing out).'''
    meter = find_meter(address)
    drop_link(meter)
    remove_gatt(meter)
    del METERS[meter.address]
    self.RemoveObject(meter.path)
    self.EmitSignal(OBJECT_MANAGER_IFACE, 'InterfacesRemoved', 'oas',
                    [dbus.ObjectPath(meter.path), dbus.Array([DEVICE_IFACE], signature='s')])


@dbus.service.method(MOCK_IFACE, in_signature='ss', out_signature='')
def AddGlucoseRecords(self, address, records_json):
    '''Append records ([[measurement_hex, context_hex_or_null], ...]): the meter took new readings.'''
    meter = find_meter(address)
    meter.records.extend(Meter._record(r) for r in json.loads(records_json))


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='')
def DisconnectGlucoseMeter(self, address):
    '''The meter drops the link (walked away, switched off).'''
    drop_link(find_meter(address))


@dbus.service.method(MOCK_IFACE, in_signature='sb', out_signature='')
def SetGlucoseMeterInRange(self, address, in_range):
    '''Out of range: the link drops, Connect and Pair fail, RSSI goes away; back in range: RSSI returns.'''
    meter = find_meter(address)
    meter.in_range = bool(in_range)
    if not meter.in_range:
        drop_link(meter)
    set_device_props(meter, {'RSSI': dbus.Int16(-60 if meter.in_range else -127)})


@dbus.service.method(MOCK_IFACE, in_signature='ss', out_signature='')
def SetGlucoseMeterOptions(self, address, options_json):
    '''Merge options into a meter's options (e.g. turn a fault on or off between tests).'''
    meter = find_meter(address)
    options = json.loads(options_json)
    meter.options.update(options)
    if 'records' in options:
        meter.records = [Meter._record(r) for r in options['records']]
    if 'busy_writes' in options:
        meter.busy_left = int(options['busy_writes'] or 0)
    if 'racp_att_error' in options or 'racp_att_error_count' in options:
        meter.att_errors_sent = 0


@dbus.service.method(MOCK_IFACE, in_signature='s', out_signature='s')
def GetGlucoseMeterState(self, address):
    '''JSON with the meter's flags and counters (racp_writes, records_sent, passkeys, start_notify, ...).'''
    return json.dumps(find_meter(address).state())


@dbus.service.method(MOCK_IFACE, in_signature='', out_signature='s')
def GetAgentState(self):
    '''JSON with every RegisterAgent call since start ([path, capability, sender]) and the default agent.'''
    manager = mockobject.objects['/org/bluez']
    agent = getattr(manager, 'default_agent', None)
    return json.dumps({'registrations': getattr(manager, 'agent_registrations', []),
                       'default_agent': str(agent) if agent else None})


def load(mock, parameters):
    bluez5.load(mock, parameters)
    METERS.clear()
    # dbusmock registers the main object in `objects` only after load(); bluez5's helpers need it now.
    mockobject.objects.setdefault('/', mock)

    # bluez5's RegisterAgent does not record who registered; the stand-in needs the agent's bus name to
    # call RequestPasskey, so replace the method with one that also records the sender.
    @dbus.service.method(AGENT_MANAGER_IFACE, in_signature='os', out_signature='', sender_keyword='sender')
    def RegisterAgent(manager, agent_path, capability, sender=None):
        # bluetoothd keys agents by their owner's bus name and forgets one when its owner leaves the
        # bus; bluez5's mock keys them by path only and never forgets, so a client restarted after a
        # crash would be refused (and bluez5 then fails building that error). Drop the dead owner's.
        previous = manager.agent_senders.get(str(agent_path))
        if agent_path in manager.agent_paths and previous is not None and previous != str(sender):
            bluez5.UnregisterAgent(manager, agent_path)
        bluez5.RegisterAgent(manager, agent_path, capability)
        manager.agent_senders[str(agent_path)] = str(sender)
        manager.agent_registrations.append([str(agent_path), str(capability), str(sender)])

    manager = mockobject.objects['/org/bluez']
    manager.agent_senders = {}
    manager.agent_registrations = []
    # dbusmock dispatches through each object's `methods` table (entry 3 is the callable dbus-python runs).
    manager.methods[AGENT_MANAGER_IFACE]['RegisterAgent'] = ('os', '', '', RegisterAgent)

    adapter = parameters.get('adapter', 'hci0') if parameters else 'hci0'
    meters = parameters.get('meters', []) if parameters else []
    if adapter:
        bluez5.AddAdapter(mock, adapter, 'sugard-test')
    for spec in meters:
        options = spec.get('options', {})
        if isinstance(options, str):
            options = json.loads(options)
        create_meter(adapter, spec['address'], spec.get('name', 'Glucose Meter'), options)
