import java.io.File;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URL;
import java.net.URLClassLoader;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The API keys and version ranges an Apache Kafka broker of a given release listed in its ApiVersions
 * answer with default settings, computed by that release's own kafka-clients code.
 *
 * <p>Usage: {@code java ApiVersionsOf.java MODE:JAR [MODE:JAR ...]}, MODE {@code zk} (a ZooKeeper-mode
 * broker) or {@code kraft} (a KRaft broker, its forwarded APIs within what its controller serves); every
 * jar is loaded by a class loader of its own (with the jars named by {@code -cp}-like {@code +JAR}
 * entries that follow it, if any). Prints one line per jar: {@code JAR key:min-max:Name ...}, the API keys
 * in order, each with the name that release gives it.
 *
 * <p>A broker's answer is assembled from the same pieces in every release, in three generations:
 * before 2.8 every API the client library knows whose record format the broker's default inter-broker
 * protocol allows ({@code ApiVersionsResponse.createApiVersionsResponse}); from 2.8 on, the APIs of the
 * broker's listener type ({@code filterApis}: a ZooKeeper-mode broker's, or a KRaft broker's), without
 * unstable versions and without the client telemetry APIs a broker lists only when a metrics reporter
 * receives them; a KRaft broker also keeps only the versions its controller serves of the APIs it
 * forwards to the controller ({@code intersectForwardableApis}).
 */
public final class ApiVersionsOf {
    private static final String REQUESTS = "org.apache.kafka.common.requests.";

    public static void main(String[] args) throws Exception {
        for (String arg : args) {
            int colon = arg.indexOf(':');
            String mode = arg.substring(0, colon);
            String[] jars = arg.substring(colon + 1).split("\\+");
            URL[] urls = new URL[jars.length];
            for (int i = 0; i < jars.length; i++) {
                urls[i] = new File(jars[i]).toURI().toURL();
            }
            try (URLClassLoader loader = new URLClassLoader(urls, ClassLoader.getPlatformClassLoader())) {
                ApiVersionsOf release = new ApiVersionsOf(loader);
                List<short[]> apis = release.answer(mode);
                apis.sort(Comparator.comparingInt(api -> api[0]));
                StringBuilder line = new StringBuilder(jars[0]);
                for (short[] api : apis) {
                    line.append(' ').append(api[0]).append(':').append(api[1]).append('-').append(api[2])
                        .append(':').append(release.name(api[0]));
                }
                System.out.println(line);
            }
        }
    }

    private final ClassLoader loader;

    private ApiVersionsOf(ClassLoader loader) {
        this.loader = loader;
    }

    private List<short[]> answer(String mode) throws Exception {
        Class<?> response = loader.loadClass(REQUESTS + "ApiVersionsResponse");
        Class<?> listenerType = find("org.apache.kafka.common.message.ApiMessageType$ListenerType");
        if (listenerType == null) {  // before 2.8: no listener types
            Method create = response.getMethod("createApiVersionsResponse", int.class, byte.class);
            return entries(create.invoke(null, 0, (byte) 2));
        }
        switch (mode) {
            case "zk":
                return entries(filterApis(response, constant(listenerType, "ZK_BROKER")));
            case "kraft":
                Object controller = filterApis(response, constant(listenerType, "CONTROLLER"));
                return entries(intersectForwardable(response, constant(listenerType, "BROKER"), controller));
            default:
                throw new IllegalArgumentException("mode " + mode + ": expected zk or kraft");
        }
    }

    /** The name this release gives API key {@code key} ({@code ApiKeys.name}). */
    private String name(short key) throws Exception {
        Class<?> apiKeys = loader.loadClass("org.apache.kafka.common.protocol.ApiKeys");
        Object api = apiKeys.getMethod("forId", int.class).invoke(null, (int) key);
        return (String) apiKeys.getField("name").get(api);
    }

    /** The widest {@code filterApis} overload of this release, called as a broker with default settings does. */
    private Object filterApis(Class<?> response, Object listener) throws Exception {
        return invokeWidest(response, "filterApis", listener, null);
    }

    private Object intersectForwardable(Class<?> response, Object listener, Object controllerApis) throws Exception {
        Class<?> apiKeys = loader.loadClass("org.apache.kafka.common.protocol.ApiKeys");
        Method forId = apiKeys.getMethod("forId", int.class);
        Map<Object, Object> byKey = new HashMap<>();
        for (Object api : (Iterable<?>) controllerApis) {
            byKey.put(forId.invoke(null, ((Number) get(api, "apiKey")).intValue()), api);
        }
        return invokeWidest(response, "intersectForwardableApis", listener, byKey);
    }

    private Object invokeWidest(Class<?> type, String name, Object listener, Map<Object, Object> map)
            throws Exception {
        Method widest = null;
        for (Method method : type.getMethods()) {
            if (method.getName().equals(name) && Modifier.isStatic(method.getModifiers())
                    && (widest == null || method.getParameterCount() > widest.getParameterCount())) {
                widest = method;
            }
        }
        if (widest == null) {
            throw new NoSuchMethodException(type.getName() + "." + name);
        }
        Class<?>[] parameters = widest.getParameterTypes();
        Object[] values = new Object[parameters.length];
        for (int i = 0; i < parameters.length; i++) {
            Class<?> parameter = parameters[i];
            if (parameter == boolean.class) {
                values[i] = false;  // no unstable versions; no client telemetry receiver
            } else if (parameter.isInstance(listener)) {
                values[i] = listener;
            } else if (parameter.getSimpleName().equals("RecordVersion")) {
                values[i] = constant(parameter, "V2");
            } else if (parameter == Map.class && map != null) {
                values[i] = map;
            } else {
                throw new IllegalStateException("cannot call " + widest + ": parameter " + parameter);
            }
        }
        return widest.invoke(null, values);
    }

    /** The (key, min, max) entries of an answer: a response object, its data, or a collection of entries. */
    private List<short[]> entries(Object answer) throws Exception {
        Object entries = answer;
        if (!(answer instanceof Iterable)) {
            Object data = get(answer, "data");
            entries = data != null ? get(data, "apiKeys") : get(answer, "apiVersions");
        }
        List<short[]> result = new ArrayList<>();
        for (Object entry : (Iterable<?>) entries) {
            result.add(new short[] {
                ((Number) get(entry, "apiKey")).shortValue(),
                ((Number) get(entry, "minVersion")).shortValue(),
                ((Number) get(entry, "maxVersion")).shortValue(),
            });
        }
        return result;
    }

    /** A no-argument public method's result, or a public field's value; null when there is neither. */
    private static Object get(Object target, String name) throws Exception {
        try {
            return target.getClass().getMethod(name).invoke(target);
        } catch (NoSuchMethodException e) {
            try {
                Field field = target.getClass().getField(name);
                return field.get(target);
            } catch (NoSuchFieldException absent) {
                return null;
            }
        }
    }

    private Class<?> find(String name) {
        try {
            return loader.loadClass(name);
        } catch (ClassNotFoundException e) {
            return null;
        }
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static Object constant(Class<?> type, String name) {
        return Enum.valueOf((Class) type, name);
    }
}
